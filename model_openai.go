// model_openai.go owns the OpenAI-compatible model client: the chat completions
// request built from a session's history and the tools' schemas, and the
// reader of its reply, streamed (SSE) or not, that becomes one assistant turn.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// The chat completions call: messages and the tools' JSON schemas, streamed
// as SSE so that text reaches the client as it arrives.
const (
	openAIPath        = "chat/completions"
	openAIDone        = "[DONE]"
	openAIToolType    = "function"
	openAIEventStream = "text/event-stream"
	openAIJSON        = "application/json"
	openAIErrorEvent  = "error"
)

// A model's call id is kept if non-empty, at most this long, printable and
// unique in the session; else one is assigned. It is only a correlation label.
const openAIMaxCallID = 128

// Every read from the model service is bounded. A line bounds one SSE line
// and one event's data (a server that sends a whole tool call in one chunk
// needs room for a file's content); a reply bounds the whole body, streamed
// or not, which also bounds one turn's text and arguments.
const (
	openAIMaxLine  = 4 << 20
	openAIMaxReply = 16 << 20
	openAIMaxCalls = 128 // tool calls in one turn
	// openAIErrorSnippet bounds how much of a reply an error quotes.
	openAIErrorSnippet = 512
)

// The model service may be any host, so the transport is not pinned to
// loopback; these bound only connection setup. The reply itself may take
// as long as the model needs: session/cancel ends it through ctx.
const (
	openAIDialTimeout     = 30 * time.Second
	openAITLSTimeout      = 10 * time.Second
	openAIMaxHeaderBytes  = 64 << 10
	openAIIdleConnTimeout = 90 * time.Second
	// openAIWriteBuffer holds a request's headers and a conversation of
	// tens of KiB whole, so that it leaves in one write: net/http's 4 KiB
	// default sends the headers and the start of the body in one write and
	// the rest through a fresh 32 KiB copy buffer in more.
	openAIWriteBuffer = 64 << 10
)

// The API key is never logged (DESIGN.md §4): it goes only in the Authorization header,
// and a reply that echoes it has it replaced before an error quotes the reply.
const (
	openAIAuthScheme  = "Bearer "
	openAIRedactedKey = "[redacted]"
)

// Arguments that are not an object fail in runTool before any permission
// step (DESIGN.md §1),
// so arguments pass through as sent, except that none at all is an empty
// object.
const openAIEmptyArgs = "{}"

// openAIConfig is what the operator chose: OPENAI_BASE_URL, OPENAI_API_KEY
// and OPENAI_MODEL, as in Qwen Code.
type openAIConfig struct {
	BaseURL string // ends in /v1 or not, with or without a slash
	APIKey  string // "" sends no Authorization header (local servers)
	Model   string
}

// openAIModel is a model behind an OpenAI-compatible chat completions API.
type openAIModel struct {
	endpoint string // {base}/chat/completions
	apiKey   string
	name     string
	client   *http.Client
	// notFoundHint is what a 404 adds when the base URL does not end in
	// /v1, where OpenAI-compatible servers answer; "" when it does.
	notFoundHint string
}

// newOpenAIModel checks cfg and returns a client with its own transport.
func newOpenAIModel(cfg openAIConfig) (*openAIModel, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai model: no model name (set OPENAI_MODEL)")
	}
	// The key is only ever put in a header; a character that cannot go
	// there is reported without echoing the key.
	for i := 0; i < len(cfg.APIKey); i++ {
		if c := cfg.APIKey[i]; c <= ' ' || c > '~' {
			return nil, errors.New("openai model: OPENAI_API_KEY holds a character not allowed in an HTTP header")
		}
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("openai model: base URL %q: %w", cfg.BaseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai model: base URL %q: want http:// or https:// and a host", cfg.BaseURL)
	}
	if u.User != nil {
		// Credentials in the URL would be repeated in every transport error.
		return nil, fmt.Errorf("openai model: base URL for host %q holds credentials: use OPENAI_API_KEY", u.Host)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, fmt.Errorf("openai model: base URL %q has a fragment", cfg.BaseURL)
	}
	// JoinPath keeps the base path (/v1 or none) and collapses the slash
	// between it and chat/completions, as the OpenAI SDKs do.
	endpoint := u.JoinPath(openAIPath)
	var notFoundHint string
	if path.Base(path.Clean("/"+u.Path)) != "v1" {
		notFoundHint = fmt.Sprintf("; the base URL %q does not end in /v1, where OpenAI-compatible servers answer: set OPENAI_BASE_URL to %q", cfg.BaseURL, u.JoinPath("v1").String())
	}
	return &openAIModel{
		endpoint:     endpoint.String(),
		notFoundHint: notFoundHint,
		apiKey:       cfg.APIKey,
		name:         cfg.Model,
		client: &http.Client{
			Transport: &http.Transport{
				// HTTPS_PROXY, HTTP_PROXY and NO_PROXY, as every HTTP client
				// honours them: the operator's proxy is where the operator
				// sends outbound traffic. The provider's client never takes
				// them (guard_client.go).
				Proxy:                  http.ProxyFromEnvironment,
				DialContext:            (&net.Dialer{Timeout: openAIDialTimeout}).DialContext,
				TLSHandshakeTimeout:    openAITLSTimeout,
				MaxResponseHeaderBytes: openAIMaxHeaderBytes,
				IdleConnTimeout:        openAIIdleConnTimeout,
				WriteBufferSize:        openAIWriteBuffer,
				ForceAttemptHTTP2:      true,
			},
			// A redirect would re-send the prompt (and maybe the key)
			// somewhere the operator did not name: it is reported as an error.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// Wire shapes of the chat completions API. Requests and replies share them;
// omitempty keeps request fields the API does not expect out of the body.
type (
	openAIRequest struct {
		Model    string          `json:"model"`
		Messages []openAIMessage `json:"messages"`
		Tools    []openAITool    `json:"tools,omitempty"`
		Stream   bool            `json:"stream"`
		// StreamOptions asks a streaming service for usage on its last
		// chunk, as Qwen Code does (DESIGN.md §7).
		StreamOptions *openAIStreamOptions `json:"stream_options,omitempty"`
	}
	openAIStreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	openAIMessage struct {
		Role       string           `json:"role,omitempty"`
		Content    *openAIContent   `json:"content,omitempty"`
		ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
		ToolCallID string           `json:"tool_call_id,omitempty"`
		// A reasoning model's thinking, in a reply only: vLLM, SGLang and
		// DeepSeek name it reasoning_content, Ollama and newer vLLM reasoning.
		ReasoningContent openAIReasoning `json:"reasoning_content,omitempty"`
		Reasoning        openAIReasoning `json:"reasoning,omitempty"`
	}
	openAIToolCall struct {
		Index    *int               `json:"index,omitempty"` // streamed replies only
		ID       string             `json:"id,omitempty"`
		Type     string             `json:"type,omitempty"`
		Function openAIFunctionCall `json:"function"`
	}
	openAIFunctionCall struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	openAITool struct {
		Type     string         `json:"type"`
		Function openAIFunction `json:"function"`
	}
	openAIFunction struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	// openAIContentPart is one part of a message whose content is an
	// array: {"type":"text","text"} or {"type":"image_url","image_url"}.
	openAIContentPart struct {
		Type     string          `json:"type"`
		Text     string          `json:"text,omitempty"`
		ImageURL *openAIImageURL `json:"image_url,omitempty"`
	}
	openAIImageURL struct {
		URL string `json:"url"`
	}
	// openAIReply is one streamed chunk or a whole non-streamed reply.
	openAIReply struct {
		Choices []openAIChoice  `json:"choices"`
		Error   json.RawMessage `json:"error"`
		Usage   *openAIUsage    `json:"usage"` // streamed: on the last chunk
		// Object is "error" in the flat error object vLLM sends mid-stream
		// ({"object":"error","message":...}) instead of a chunk.
		Object string `json:"object"`
		raw    []byte // the bytes read, which a flat error quotes
	}
	openAIUsage struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	openAIChoice struct {
		Index        int           `json:"index"`
		Delta        openAIMessage `json:"delta"`   // streamed
		Message      openAIMessage `json:"message"` // not streamed
		FinishReason *string       `json:"finish_reason"`
	}
)

// openAIContent is a message's content: a string, or an array of parts
// (Parts non-nil) for a user message with images.
type openAIContent struct {
	Text  string
	Parts []openAIContentPart
}

// Content part types of the chat completions API.
const (
	openAIPartText  = "text"
	openAIPartImage = "image_url"
)

// openAIReasoning is a reply's reasoning text. Only a string is thinking
// to show; any other JSON value (a server's structured details) is read as
// none rather than failing the turn, since thoughts never reach a tool.
type openAIReasoning string

func (r *openAIReasoning) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*r = openAIReasoning(s)
	} else {
		*r = ""
	}
	return nil
}

// openAIErrorObject is the value of a flat error object's "object" field.
const openAIErrorObject = "error"

// thoughtSinkKey carries, in a model call's context, where a reasoning
// model's thinking goes as it arrives (acp.go: agent_thought_chunk).
type thoughtSinkKey struct{}

// withThoughtSink returns ctx whose model calls pass thinking to thought.
func withThoughtSink(ctx context.Context, thought func(string)) context.Context {
	return context.WithValue(ctx, thoughtSinkKey{}, thought)
}

// thoughtSink is ctx's thought sink, or one that drops thinking.
func thoughtSink(ctx context.Context) func(string) {
	if f, ok := ctx.Value(thoughtSinkKey{}).(func(string)); ok && f != nil {
		return f
	}
	return func(string) {}
}

func (c openAIContent) MarshalJSON() ([]byte, error) {
	if c.Parts != nil {
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// UnmarshalJSON reads a string or an array of parts, each part strictly.
func (c *openAIContent) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return err
		}
		c.Text, c.Parts = "", make([]openAIContentPart, len(raws))
		for i, raw := range raws {
			if err := decodeStrict(raw, &c.Parts[i]); err != nil {
				return fmt.Errorf("content part %d: %v", i, err)
			}
		}
		return nil
	}
	c.Parts = nil
	return json.Unmarshal(data, &c.Text)
}

// text is the content's text: the string, or its text parts in order.
func (c *openAIContent) text() string {
	switch {
	case c == nil:
		return ""
	case c.Parts == nil:
		return c.Text
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Type == openAIPartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// next sends the history and tools and reads the assistant's turn.
func (m *openAIModel) next(ctx context.Context, history []message, tools []*toolSpec, text func(string)) (modelTurn, error) {
	body, err := openAIRequestBody(m.name, history, tools)
	if err != nil {
		return modelTurn{}, err
	}
	reply, mediaType, err := m.post(ctx, body)
	if err != nil {
		return modelTurn{}, err
	}
	defer reply.Close()
	t := newOpenAITurn(m.apiKey)
	t.thought = thoughtSink(ctx)
	if err := readOpenAIReply(ctx, mediaType, http.MaxBytesReader(nil, reply, openAIMaxReply), t, text); err != nil {
		return modelTurn{}, err
	}
	return t.turn(history)
}

// post sends one chat completions request body with the key and returns the
// reply's body and media type, once its status and Content-Type are ones the
// reply readers take. An error quotes the reply with the key redacted.
func (m *openAIModel) post(ctx context.Context, body []byte) (io.ReadCloser, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, "", fmt.Errorf("chat completions request: %w", err)
	}
	req.Header.Set("Content-Type", openAIJSON)
	req.Header.Set("Accept", openAIEventStream+", "+openAIJSON)
	if m.apiKey != "" {
		req.Header.Set("Authorization", openAIAuthScheme+m.apiKey)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("chat completions request: %w", ctx.Err())
		}
		return nil, "", fmt.Errorf("chat completions request: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		// Read past the snippet by the key's length, so a key the server
		// echoes near the cut is whole when it is redacted.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, int64(openAIErrorSnippet+len(m.apiKey))))
		hint := ""
		if resp.StatusCode == http.StatusNotFound {
			hint = m.notFoundHint
		}
		return nil, "", fmt.Errorf("chat completions request: POST %s: status %s: body %s%s", m.endpoint, resp.Status, quoteSnippet(b, m.apiKey), hint)
	}
	ct := resp.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(ct)
	if mediaType != openAIEventStream && mediaType != openAIJSON {
		resp.Body.Close()
		return nil, "", fmt.Errorf("chat completions reply: Content-Type %q: want %s or %s", ct, openAIEventStream, openAIJSON)
	}
	return resp.Body, mediaType, nil
}

// readOpenAIReply reads a reply of mediaType (openAIEventStream or
// openAIJSON) into t; a failure after ctx ended reports ctx's error.
func readOpenAIReply(ctx context.Context, mediaType string, r io.Reader, t *openAITurn, text func(string)) error {
	var err error
	switch mediaType {
	case openAIEventStream:
		err = readOpenAIStream(r, t, text)
	case openAIJSON:
		err = readOpenAIJSON(r, t, text)
	default:
		err = fmt.Errorf("chat completions reply: media type %q: want %s or %s", mediaType, openAIEventStream, openAIJSON)
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("chat completions reply: %w", ctx.Err())
	}
	return err
}

// openAIRequestBody converts the history and tools to a streaming request.
// Arguments go back as the string the model sent, so arguments that are not
// JSON cannot break the request. The body is byte for byte json.Marshal's
// of openAIRequest (the test holds it there); the messages, which grow with
// the session and are sent again on every call, are appended by hand.
func openAIRequestBody(model string, history []message, tools []*toolSpec) ([]byte, error) {
	return appendOpenAIRequest(nil, model, history, tools)
}

// openAIToolsHeld is how many tools' encodings appendOpenAIRequest holds
// without an allocation: the built-ins and a few MCP tools.
const openAIToolsHeld = 16

// appendOpenAIRequest appends openAIRequestBody's request to b, growing it
// once for the whole request.
func appendOpenAIRequest(b []byte, model string, history []message, tools []*toolSpec) ([]byte, error) {
	var encoded [openAIToolsHeld][]byte
	toolsJSON := encoded[:0]
	size := len(model) + len(openAIRequestTail) + 64
	for _, s := range tools {
		e, err := openAIToolJSON(s)
		if err != nil {
			return nil, fmt.Errorf("build chat completions request: %w", err)
		}
		toolsJSON = append(toolsJSON, e)
		size += len(e) + 1
	}
	for _, h := range history {
		size += len(h.Text) + len(h.Result.Output) + 64
		for _, c := range h.Calls {
			size += len(c.Args) + len(c.ID) + len(c.Name) + 64
		}
	}
	b = slices.Grow(b, size)
	b = appendJSONString(append(b, `{"model":`...), model, true)
	b = append(b, `,"messages":[`...)
	for i, h := range history {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendOpenAIMessage(b, h); !ok {
			return nil, fmt.Errorf("build chat completions request: history message %d has role %q", i, h.Role)
		}
	}
	b = append(b, ']')
	if len(toolsJSON) > 0 {
		b = append(b, `,"tools":[`...)
		for i, e := range toolsJSON {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, e...)
		}
		b = append(b, ']')
	}
	return append(b, openAIRequestTail...), nil
}

// openAIToolsEncoded holds each tool's encoding as a request carries it,
// by name, with the description and schema it was made of: every call of a
// session offers the same tools, and json.Marshal compacts each schema
// anew. An entry is used only for the same description and schema bytes.
var openAIToolsEncoded struct {
	mu sync.Mutex
	m  map[string]openAIToolEncoded
}

type openAIToolEncoded struct {
	description string
	schema      []byte
	json        []byte
}

// maxOpenAIToolsEncoded bounds the cache: past it, it starts afresh, so MCP
// servers that come and go cannot grow it without end.
const maxOpenAIToolsEncoded = 4096

// openAIToolJSON is s as json.Marshal writes its openAITool.
func openAIToolJSON(s *toolSpec) ([]byte, error) {
	schema := s.parametersSchema()
	c := &openAIToolsEncoded
	c.mu.Lock()
	e, ok := c.m[s.Name]
	c.mu.Unlock()
	if ok && e.description == s.Description && bytes.Equal(e.schema, schema) {
		return e.json, nil
	}
	b, err := json.Marshal(openAITool{
		Type:     openAIToolType,
		Function: openAIFunction{Name: s.Name, Description: s.Description, Parameters: schema},
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxOpenAIToolsEncoded {
		c.m = map[string]openAIToolEncoded{}
	}
	c.m[s.Name] = openAIToolEncoded{description: s.Description, schema: bytes.Clone(schema), json: b}
	c.mu.Unlock()
	return b, nil
}

// openAIRequestTail ends every request: streamed, with usage on the last
// chunk (openAIRequest's Stream and StreamOptions).
const openAIRequestTail = `,"stream":true,"stream_options":{"include_usage":true}}`

// appendOpenAIMessage appends h as the openAIMessage json.Marshal would
// write for it; ok is false for a role the API has no message of.
func appendOpenAIMessage(b []byte, h message) (_ []byte, ok bool) {
	switch h.Role {
	case roleSystem, roleUser, roleAssistant, roleTool:
	default:
		return b, false
	}
	b = appendJSONString(append(b, `{"role":`...), h.Role, true)
	switch {
	case h.Role == roleUser && len(h.Images) > 0:
		b = appendOpenAIParts(append(b, `,"content":`...), h)
	case h.Role == roleTool:
		b = appendJSONString(append(b, `,"content":`...), h.Result.Output, true)
	case h.Role != roleAssistant || h.Text != "" || len(h.Calls) == 0:
		// An assistant's content may be absent only when it proposed calls.
		b = appendJSONString(append(b, `,"content":`...), h.Text, true)
	}
	if h.Role == roleAssistant && len(h.Calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range h.Calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			if c.ID != "" {
				b = append(appendJSONString(append(b, `"id":`...), c.ID, true), ',')
			}
			b = append(b, `"type":"`+openAIToolType+`","function":{"name":`...)
			b = appendJSONString(b, c.Name, true)
			args := string(c.Args)
			if args == "" {
				args = openAIEmptyArgs
			}
			b = append(appendJSONString(append(b, `,"arguments":`...), args, true), '}', '}')
		}
		b = append(b, ']')
	}
	if h.Role == roleTool && h.CallID != "" {
		b = appendJSONString(append(b, `,"tool_call_id":`...), h.CallID, true)
	}
	return append(b, '}'), true
}

// appendOpenAIParts appends a user message's content with images as
// userContent's parts: its text (when there is text), then one image part
// per image as a data URL.
func appendOpenAIParts(b []byte, h message) []byte {
	b = append(b, '[')
	if h.Text != "" {
		b = append(b, `{"type":"`+openAIPartText+`","text":`...)
		b = append(appendJSONString(b, h.Text, true), '}')
	}
	for i, img := range h.Images {
		if i > 0 || h.Text != "" {
			b = append(b, ',')
		}
		b = append(b, `{"type":"`+openAIPartImage+`","image_url":{"url":`...)
		b = append(appendJSONString(b, "data:"+img.MimeType+";base64,"+img.Data, true), '}', '}')
	}
	return append(b, ']')
}

// openAITurn assembles one assistant turn from reply chunks.
type openAITurn struct {
	secret   string // redacted from quoted reply bytes
	text     strings.Builder
	calls    []*openAIPartialCall // in order of first appearance
	byIndex  map[int]*openAIPartialCall
	finished bool // a finish_reason arrived
	usage    *modelUsage
	// unindexed is the last call begun by a fragment without an index,
	// which an index-less fragment with neither id nor name continues.
	unindexed *openAIPartialCall
	// thought receives reasoning text as it arrives; it is never part of
	// the turn, so it is neither sent back nor run.
	thought func(string)
}

// openAIPartialCall is a tool call whose fragments are still arriving.
type openAIPartialCall struct {
	id, name string
	args     strings.Builder
}

func newOpenAITurn(secret string) *openAITurn {
	return &openAITurn{secret: secret, byIndex: make(map[int]*openAIPartialCall), thought: func(string) {}}
}

// add applies one reply's first choice: text goes to text at once, tool-call
// fragments are joined by index.
func (t *openAITurn) add(reply *openAIReply, streamed bool, text func(string)) error {
	if len(reply.Error) > 0 && string(reply.Error) != "null" {
		return fmt.Errorf("chat completions reply: error %s", quoteSnippet(reply.Error, t.secret))
	}
	if reply.Object == openAIErrorObject {
		// The flat shape has no "error" member: the whole object is the
		// error, and it ends the turn as an {"error":{...}} chunk does.
		return fmt.Errorf("chat completions reply: error %s", quoteSnippet(reply.raw, t.secret))
	}
	if u := reply.Usage; u != nil {
		t.usage = &modelUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		if u.PromptTokensDetails != nil {
			t.usage.CachedReadTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.CompletionTokensDetails != nil {
			t.usage.ThoughtTokens = u.CompletionTokensDetails.ReasoningTokens
		}
	}
	for _, ch := range reply.Choices {
		// We ask for one choice; any other is not ours to run.
		if ch.Index != 0 {
			continue
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			t.finished = true
		}
		msg := ch.Message
		if streamed {
			msg = ch.Delta
		}
		// A server that sends both names sends the same text twice.
		if r := msg.ReasoningContent; r != "" {
			t.thought(string(r))
		} else if r := msg.Reasoning; r != "" {
			t.thought(string(r))
		}
		if s := msg.Content.text(); s != "" {
			t.text.WriteString(s)
			text(s)
		}
		for _, tc := range msg.ToolCalls {
			var c *openAIPartialCall
			if tc.Index != nil {
				c = t.byIndex[*tc.Index]
				// Some servers reuse one index for every call; a new id
				// there starts a new call.
				if c != nil && tc.ID != "" && c.id != "" && tc.ID != c.id {
					c = nil
				}
			} else {
				// A server that leaves out index (and often id) sends each
				// call whole, several in one message: a fragment with its
				// own id, or with a function name and no id, is a new call;
				// only a bare fragment continues the last one.
				c = t.unindexed
				if c != nil && (tc.ID != "" && tc.ID != c.id || tc.ID == "" && tc.Function.Name != "") {
					c = nil
				}
			}
			if c == nil {
				if len(t.calls) == openAIMaxCalls {
					return fmt.Errorf("chat completions reply: more than %d tool calls in one turn", openAIMaxCalls)
				}
				c = &openAIPartialCall{}
				t.calls = append(t.calls, c)
				if tc.Index != nil {
					t.byIndex[*tc.Index] = c
				} else {
					t.unindexed = c
				}
			}
			if tc.ID != "" {
				c.id = tc.ID
			}
			if tc.Function.Name != "" {
				c.name = tc.Function.Name
			}
			c.args.WriteString(tc.Function.Arguments)
		}
	}
	return nil
}

// turn returns the assembled turn. A call keeps the model's id only if it is
// a valid id not yet used in the session; otherwise it gets a new one.
func (t *openAITurn) turn(history []message) (modelTurn, error) {
	used := make(map[string]bool)
	for _, h := range history {
		for _, c := range h.Calls {
			used[c.ID] = true
		}
		if h.CallID != "" {
			used[h.CallID] = true
		}
	}
	out := modelTurn{Text: t.text.String(), Usage: t.usage}
	for _, c := range t.calls {
		id := c.id
		if !validModelCallID(id) || used[id] {
			id = newCallID()
		}
		used[id] = true
		args := c.args.String()
		if args == "" {
			args = openAIEmptyArgs
		}
		out.Calls = append(out.Calls, toolCall{ID: id, Name: c.name, Args: json.RawMessage(args)})
	}
	return out, nil
}

// validModelCallID reports whether a model-provided id is non-empty, at
// most openAIMaxCallID bytes and printable ASCII.
func validModelCallID(id string) bool {
	if id == "" || len(id) > openAIMaxCallID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// readOpenAIJSON reads a reply from a server that ignored stream:true.
func readOpenAIJSON(r io.Reader, t *openAITurn, text func(string)) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return openAIReadError(err)
	}
	reply := openAIReply{raw: b}
	// Not decodeStrict: the reply is a third party's evolving format, and
	// a field we do not know cannot turn a denial into an allow — every
	// call still goes through runTool. One value, no trailing data.
	if err := json.Unmarshal(b, &reply); err != nil {
		return fmt.Errorf("chat completions reply: invalid JSON: %w", err)
	}
	if err := t.add(&reply, false, text); err != nil {
		return err
	}
	if len(reply.Choices) == 0 {
		return errors.New("chat completions reply: no choices")
	}
	return nil
}

// readOpenAIStream reads an SSE reply until data: [DONE], calling text for
// each text chunk as it arrives. A stream that ends without [DONE] is
// complete only if a finish_reason arrived.
func readOpenAIStream(r io.Reader, t *openAITurn, text func(string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4<<10), openAIMaxLine)
	var data []byte
	var event string
	dataLines, chunks := 0, 0
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
			first = false
		}
		if len(line) == 0 {
			// Dispatch: an event without data lines is nothing.
			if dataLines == 0 {
				event = ""
				continue
			}
			payload := data[:len(data)-1] // the last line's "\n"
			switch {
			case event == openAIErrorEvent:
				return fmt.Errorf("chat completions stream: error event %s", quoteSnippet(payload, t.secret))
			case event != "" && event != "message":
				// Events other than message are not chunks.
			case string(payload) == openAIDone:
				return nil
			case len(payload) > 0:
				chunks++
				reply := openAIReply{raw: payload}
				// Not decodeStrict, for the reason in readOpenAIJSON.
				if err := json.Unmarshal(payload, &reply); err != nil {
					return fmt.Errorf("chat completions stream: chunk %d: invalid JSON: %w", chunks, err)
				}
				if err := t.add(&reply, true, text); err != nil {
					return err
				}
			}
			data, dataLines, event = data[:0], 0, ""
			continue
		}
		if line[0] == ':' {
			continue // a comment, such as a keep-alive
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "data":
			if len(data)+len(value)+1 > openAIMaxLine {
				return fmt.Errorf("chat completions stream: event data longer than %d bytes", openAIMaxLine)
			}
			data = append(append(data, value...), '\n')
			dataLines++
		case "event":
			event = string(value)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("chat completions stream: line longer than %d bytes", openAIMaxLine)
		}
		return openAIReadError(err)
	}
	if !t.finished {
		return fmt.Errorf("chat completions stream: ended before %s or a finish_reason", openAIDone)
	}
	return nil
}

// openAIReadError names a failed read of the reply body.
func openAIReadError(err error) error {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return fmt.Errorf("chat completions reply: longer than %d bytes", openAIMaxReply)
	}
	return fmt.Errorf("read chat completions reply: %w", err)
}

// quoteSnippet quotes at most openAIErrorSnippet bytes of b for an error
// text, with secret redacted first so the cut cannot leave part of it.
func quoteSnippet(b []byte, secret string) string {
	s := string(b)
	if secret != "" {
		s = strings.ReplaceAll(s, secret, openAIRedactedKey)
	}
	if len(s) > openAIErrorSnippet {
		return fmt.Sprintf("%q (truncated)", s[:openAIErrorSnippet])
	}
	return fmt.Sprintf("%q", s)
}
