// acp_history.go owns the saved conversations behind ACP session/load: the
// state directory, one file per session written after each prompt, the
// bounds on their size and number, and reading one back strictly.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

const (
	// historyMaxBytes bounds one session's file: past it the oldest
	// exchanges (a user prompt and what answered it) are dropped.
	historyMaxBytes = 4 << 20
	// historyMaxSessions bounds the saved sessions: past it the least
	// recently written are removed.
	historyMaxSessions = 256
	historyVersion     = 1
	historyFileSuffix  = ".json"
	historyTempPrefix  = ".tmp-"
	envStateHome       = "XDG_STATE_HOME"
)

// historyFile is one saved session. It holds what the client saw and what
// the model needs to go on: prompts, assistant text, the calls as proposed,
// and each call's updates as they were sent. Never the environment, a
// token, or a provider reason the client was not shown.
type historyFile struct {
	Version   int              `json:"version"`
	SessionID string           `json:"sessionId"`
	Cwd       string           `json:"cwd"`
	Messages  []historyMessage `json:"messages"` // last: encodeHistory appends to it
	// encoded holds the encoding of each of the first len(encoded)
	// Messages as an earlier save wrote it, so that a save encodes only the
	// messages new since (a session's file is written after every prompt).
	encoded [][]byte
}

type historyMessage struct {
	Role   string         `json:"role"`
	Text   string         `json:"text,omitempty"`
	Images []historyImage `json:"images,omitempty"`
	Calls  []historyCall  `json:"calls,omitempty"`
	// A tool message: the call it answers, how it ended, and its
	// tool_call and final tool_call_update as the client got them.
	CallID    string            `json:"callId,omitempty"`
	Tool      string            `json:"tool,omitempty"`
	Status    string            `json:"status,omitempty"`
	Output    string            `json:"output,omitempty"`
	ErrorType string            `json:"errorType,omitempty"`
	Shown     []json.RawMessage `json:"shown,omitempty"`
}

type historyImage struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type historyCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// historyStore is the state directory (DESIGN.md §6): 0700, owned by this
// user, files 0600 written by rename.
type historyStore struct {
	dir string
	mu  sync.Mutex // one writer at a time, so pruning sees every file
}

// defaultStateDir is where sessions are saved when --state-dir is not
// given: $XDG_STATE_HOME/acpguard/sessions, else under the user's cache
// directory; "" when neither is known.
func defaultStateDir(env *procEnv) string {
	if d := env.lookup(envStateHome); filepath.IsAbs(d) {
		return filepath.Join(d, "acpguard", "sessions")
	}
	if d, err := os.UserCacheDir(); err == nil && filepath.IsAbs(d) {
		return filepath.Join(d, "acpguard", "sessions")
	}
	return ""
}

// openHistoryStore creates dir (0700) if needed and refuses one that
// another user could write or that this user does not own.
func openHistoryStore(dir string) (*historyStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory %q: %v", dir, err)
	}
	if _, err := checkStateDir(dir); err != nil {
		return nil, err
	}
	return &historyStore{dir: dir}, nil
}

// checkStateDir refuses an existing state directory that is not a
// directory this user owns, or that another user could write; it returns
// the directory's mode.
func checkStateDir(dir string) (fs.FileMode, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return 0, fmt.Errorf("state directory %q: %v", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return 0, fmt.Errorf("state directory %q: not a directory (a symbolic link is refused)", dir)
	case !ok || int(st.Uid) != os.Getuid():
		return 0, fmt.Errorf("state directory %q: not owned by this user (uid %d)", dir, os.Getuid())
	case fi.Mode().Perm()&0o022 != 0:
		return 0, fmt.Errorf("state directory %q: mode %04o lets other users write it; chmod 700 it", dir, fi.Mode().Perm())
	}
	return fi.Mode().Perm(), nil
}

// path is a session's file. Session ids are validSessionID's alphabet, so
// the name stays in dir; the suffix keeps "." and ".." ordinary names.
func (h *historyStore) path(id string) string {
	return filepath.Join(h.dir, id+historyFileSuffix)
}

// save writes f atomically, its oldest exchanges dropped past
// historyMaxBytes, then prunes the oldest sessions past historyMaxSessions.
// It returns the messages it kept and their encodings.
func (h *historyStore) save(f *historyFile) ([]historyMessage, [][]byte, error) {
	data, kept, encoded, err := encodeHistory(f)
	if err != nil {
		return f.Messages, f.encoded, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tmp, err := os.CreateTemp(h.dir, historyTempPrefix+"*")
	if err != nil {
		return kept, encoded, fmt.Errorf("save session %q: %v", f.SessionID, err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), h.path(f.SessionID))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return kept, encoded, fmt.Errorf("save session %q: %v", f.SessionID, err)
	}
	return kept, encoded, h.prune(f.SessionID)
}

// encodeHistory is f's file, at most historyMaxBytes, and the messages it
// holds with their encodings: whole exchanges are dropped from the front
// until it fits, so the model never sees a tool result without the call it
// answers. Each message is encoded once, here or by an earlier save, and
// the file is json.Marshal's of what it holds.
func encodeHistory(f *historyFile) ([]byte, []historyMessage, [][]byte, error) {
	out := *f
	out.Version = historyVersion
	out.Messages = []historyMessage{}
	head, err := json.Marshal(&out)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("save session %q: %v", f.SessionID, err)
	}
	// The messages go where the empty array closes the object.
	head, ok := bytes.CutSuffix(head, []byte("[]}"))
	if !ok {
		return nil, nil, nil, fmt.Errorf("save session %q: the file does not end with its messages", f.SessionID)
	}
	encoded := make([][]byte, len(f.Messages))
	copy(encoded, f.encoded)
	total := len(head) + len("[]}")
	for i := range f.Messages {
		if encoded[i] == nil {
			if encoded[i], err = json.Marshal(&f.Messages[i]); err != nil {
				return nil, nil, nil, fmt.Errorf("save session %q: %v", f.SessionID, err)
			}
		}
		total += len(encoded[i]) + 1 // and its comma
	}
	first := 0
	for total > historyMaxBytes && first < len(encoded) {
		total -= len(encoded[first]) + 1
		first++
		for first < len(encoded) && f.Messages[first].Role != roleUser {
			total -= len(encoded[first]) + 1
			first++
		}
	}
	data := append(make([]byte, 0, total), head...)
	data = append(data, '[')
	for i, b := range encoded[first:] {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, b...)
	}
	kept := f.Messages[first:]
	if kept == nil {
		kept = []historyMessage{}
	}
	return append(data, ']', '}'), kept, encoded[first:], nil
}

// prune removes the least recently written sessions past
// historyMaxSessions, never keep's. h.mu is held.
func (h *historyStore) prune(keep string) error {
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return fmt.Errorf("prune state directory %q: %v", h.dir, err)
	}
	type saved struct {
		name string
		mod  int64
	}
	var files []saved
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, historyFileSuffix) || strings.HasPrefix(name, historyTempPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil {
			files = append(files, saved{name, fi.ModTime().UnixNano()})
		}
	}
	if len(files) <= historyMaxSessions {
		return nil
	}
	slices.SortFunc(files, func(a, b saved) int {
		return cmp.Or(cmp.Compare(a.mod, b.mod), strings.Compare(a.name, b.name))
	})
	for _, f := range files[:len(files)-historyMaxSessions] {
		if f.name != keep+historyFileSuffix {
			os.Remove(filepath.Join(h.dir, f.name))
		}
	}
	return nil
}

// errNoHistory: no session of that id was saved.
var errNoHistory = errors.New("no saved session")

// load reads back a session's file.
func (h *historyStore) load(id string) (*historyFile, error) {
	f, err := os.OpenFile(h.path(id), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoHistory
	}
	if err != nil {
		return nil, fmt.Errorf("read saved session %q: %v", id, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, historyMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read saved session %q: %v", id, err)
	}
	if len(data) > historyMaxBytes {
		return nil, fmt.Errorf("read saved session %q: more than %d bytes", id, historyMaxBytes)
	}
	hf, err := decodeHistory(data)
	if err != nil {
		return nil, fmt.Errorf("read saved session %q: %v", id, err)
	}
	if hf.SessionID != id {
		return nil, fmt.Errorf("read saved session %q: the file names session %q", id, hf.SessionID)
	}
	return hf, nil
}

// decodeHistory decodes a session file strictly and checks what replay and
// the model rely on.
func decodeHistory(data []byte) (*historyFile, error) {
	var f historyFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, err
	}
	switch {
	case f.Version != historyVersion:
		return nil, fmt.Errorf("version %d, want %d", f.Version, historyVersion)
	case !validSessionID(f.SessionID):
		return nil, fmt.Errorf("sessionId %q is not a session id", f.SessionID)
	case !filepath.IsAbs(f.Cwd):
		return nil, fmt.Errorf("cwd %q is not an absolute path", f.Cwd)
	}
	for i, m := range f.Messages {
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("message %d: %v", i, err)
		}
	}
	return &f, nil
}

func (m *historyMessage) check() error {
	switch m.Role {
	case roleUser, roleAssistant:
		if m.CallID != "" || m.Tool != "" || m.Status != "" || m.Output != "" || m.ErrorType != "" || m.Shown != nil {
			return fmt.Errorf("a %s message with tool result members", m.Role)
		}
		if m.Role == roleAssistant && m.Images != nil {
			return errors.New("an assistant message with images")
		}
		if m.Role == roleUser && m.Calls != nil {
			return errors.New("a user message with calls")
		}
		for _, c := range m.Calls {
			if c.ID == "" || c.Name == "" {
				return errors.New("a call without id or name")
			}
		}
		for _, img := range m.Images {
			if _, err := (contentBlock{Type: "image", MimeType: img.MimeType, Data: mustJSONString(img.Data)}).image(); err != nil {
				return err
			}
		}
	case roleTool:
		if m.Text != "" || m.Images != nil || m.Calls != nil {
			return errors.New("a tool message with text, images or calls")
		}
		if m.CallID == "" {
			return errors.New("a tool message without callId")
		}
		if !slices.Contains([]string{statusCompleted, statusFailed, statusCancelled}, m.Status) {
			return fmt.Errorf("tool status %q", m.Status)
		}
		for _, raw := range m.Shown {
			if _, err := shownUpdate(raw, m.CallID); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("role %q", m.Role)
	}
	return nil
}

func mustJSONString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// shownUpdate is a saved tool update, checked to be one about callID: replay
// sends nothing else.
func shownUpdate(raw json.RawMessage, callID string) (map[string]any, error) {
	var u map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&u); err != nil || u == nil {
		return nil, errors.New("a shown update that is not an object")
	}
	if k := u["sessionUpdate"]; k != "tool_call" && k != "tool_call_update" {
		return nil, fmt.Errorf("shown update kind %v", k)
	}
	if u["toolCallId"] != callID {
		return nil, fmt.Errorf("shown update for call %v in the result of %q", u["toolCallId"], callID)
	}
	return u, nil
}

// historyOf converts model messages to saved ones; shown has each call's
// updates by call id.
func historyOf(msgs []message, shown map[string][]json.RawMessage) []historyMessage {
	out := make([]historyMessage, 0, len(msgs))
	for _, m := range msgs {
		h := historyMessage{Role: m.Role, Text: m.Text}
		for _, img := range m.Images {
			// An image that alone fills the file is not saved: the prompt's
			// text is.
			if len(img.Data) < historyMaxBytes/2 {
				h.Images = append(h.Images, historyImage(img))
			}
		}
		for _, c := range m.Calls {
			args := c.Args
			if !json.Valid(args) {
				args = mustJSONString(string(args)) // as proposed, kept readable
			}
			h.Calls = append(h.Calls, historyCall{ID: c.ID, Name: c.Name, Args: args})
		}
		if m.Role == roleTool {
			h.Text = ""
			h.CallID, h.Tool = m.CallID, m.Tool
			h.Status, h.Output, h.ErrorType = m.Result.Status, m.Result.Output, m.Result.ErrorType
			h.Shown = shown[m.CallID]
		}
		out = append(out, h)
	}
	return out
}

// messagesOf is the model conversation of saved messages. A loaded result
// has no rawOutput: the model reads only the output text.
func messagesOf(hs []historyMessage) []message {
	out := make([]message, 0, len(hs))
	for _, h := range hs {
		m := message{Role: h.Role, Text: h.Text, CallID: h.CallID, Tool: h.Tool,
			Result: toolResult{Status: h.Status, Output: h.Output, ErrorType: h.ErrorType}}
		for _, img := range h.Images {
			m.Images = append(m.Images, promptImage(img))
		}
		for _, c := range h.Calls {
			m.Calls = append(m.Calls, toolCall{ID: c.ID, Name: c.Name, Args: c.Args})
		}
		out = append(out, m)
	}
	return out
}

// sessionRecord is what a session keeps for its file: each call's updates
// as sent, until its result is saved.
type sessionRecord struct {
	mu    sync.Mutex
	shown map[string][]json.RawMessage
}

// note keeps a tool_call, and a tool_call_update that ends a call, as the
// client got them.
func (r *sessionRecord) note(u map[string]any) {
	kind := u["sessionUpdate"]
	status := u["status"]
	if kind != "tool_call" && !(kind == "tool_call_update" && (status == "completed" || status == "failed")) {
		return
	}
	id, _ := u["toolCallId"].(string)
	raw, err := json.Marshal(u)
	if err != nil || id == "" {
		return
	}
	r.noteRaw(id, raw)
}

// noteRaw keeps raw, a tool update about call id as json.Marshal encodes it.
func (r *sessionRecord) noteRaw(id string, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shown == nil {
		r.shown = map[string][]json.RawMessage{}
	}
	r.shown[id] = append(r.shown[id], raw)
}

// take returns and forgets the updates kept so far.
func (r *sessionRecord) take() map[string][]json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.shown
	r.shown = nil
	return s
}

// openStateDir opens the state directory of opts. One named by --state-dir
// must be usable; the default one that is not is warned about, and the
// agent runs without session/load.
func openStateDir(opts acpOptions, log *slog.Logger) (*historyStore, error) {
	if opts.StateDir == "" {
		return nil, nil
	}
	h, err := openHistoryStore(opts.StateDir)
	if err == nil {
		return h, nil
	}
	if opts.StateDirGiven {
		return nil, usagef("--%s: %v", flagStateDir, err)
	}
	log.Warn("sessions are not saved, so session/load is not offered; pass --state-dir DIR or --state-dir off", "err", err)
	return nil, nil
}

// saveSession writes s's file after a prompt; a failure is logged, never
// the prompt's.
func (a *agent) saveSession(s *session) {
	if a.history == nil {
		return
	}
	shown := s.record.take()
	s.mu.Lock()
	s.saved = append(s.saved, historyOf(s.history[s.savedUpTo:], shown)...)
	s.savedUpTo = len(s.history)
	f := &historyFile{SessionID: s.id, Cwd: s.cwd, Messages: s.saved, encoded: s.savedEncoded}
	s.mu.Unlock()
	kept, encoded, err := a.history.save(f)
	s.mu.Lock()
	s.saved = kept[:len(kept):len(kept)]
	s.savedEncoded = encoded[:len(encoded):len(encoded)]
	s.mu.Unlock()
	if err != nil {
		a.log.Warn("session not saved: session/load will not find its last prompt", "session", s.id, "err", err)
	}
}

// loadSession answers session/load: the saved session is replayed as
// session/update notifications before the answer, and its model
// conversation goes on from there. No call is run again.
func (a *agent) loadSession(ctx context.Context, params json.RawMessage) (any, error) {
	const op = methodSessionLoad
	if a.history == nil {
		return nil, &rpcError{Code: rpcMethodNotFound, Message: fmt.Sprintf("%s: not offered: sessions are not saved here (--%s)", op, flagStateDir)}
	}
	var p struct {
		SessionID             string            `json:"sessionId"`
		Cwd                   string            `json:"cwd"`
		AdditionalDirectories []string          `json:"additionalDirectories,omitempty"`
		McpServers            []json.RawMessage `json:"mcpServers"`
		Meta                  json.RawMessage   `json:"_meta,omitempty"`
	}
	if err := decodeStrict(params, &p); err != nil {
		return nil, invalidParams("%s: %v", op, err)
	}
	if len(p.AdditionalDirectories) > 0 {
		return nil, invalidParams("%s: additionalDirectories %q: not supported, tools work under cwd only", op, p.AdditionalDirectories)
	}
	if !validSessionID(p.SessionID) {
		return nil, invalidParams("%s: sessionId %q is not a session id (1 to %d of A-Z a-z 0-9 - _ . :)", op, p.SessionID, maxSessionIDLen)
	}
	if !filepath.IsAbs(p.Cwd) {
		return nil, invalidParams("%s: cwd %q is not an absolute path", op, p.Cwd)
	}
	if fi, err := os.Stat(p.Cwd); err != nil || !fi.IsDir() {
		return nil, invalidParams("%s: cwd %q is not an existing directory", op, p.Cwd)
	}
	if a.session(p.SessionID) != nil {
		return nil, invalidParams("%s: session %q is already open", op, p.SessionID)
	}
	hf, err := a.history.load(p.SessionID)
	if errors.Is(err, errNoHistory) {
		return nil, &rpcError{Code: rpcNotFound, Message: fmt.Sprintf("%s: unknown session %q: no saved session of that id", op, p.SessionID)}
	}
	if err != nil {
		return nil, &rpcError{Code: rpcInternalError, Message: fmt.Sprintf("%s: %v", op, err)}
	}
	if cwd := filepath.Clean(p.Cwd); cwd != hf.Cwd {
		return nil, invalidParams("%s: cwd %q is not the session's cwd %q", op, cwd, hf.Cwd)
	}
	ss, err := a.settingsFor(hf.Cwd, hf.SessionID)
	if err != nil {
		return nil, invalidParams("%s: %v", op, err)
	}
	history := messagesOf(hf.Messages)
	s := &session{id: hf.SessionID, cwd: hf.Cwd, settings: ss.Settings, mode: ss.Settings.Tools.ApprovalMode, background: &processSet{}, always: map[string]bool{},
		history: history, saved: hf.Messages, savedUpTo: len(history)}
	if err := a.openSession(ctx, s, ss, p.McpServers, op); err != nil {
		return nil, err
	}
	a.replay(s, hf.Messages)
	s.record.take() // the replayed calls are saved already
	return map[string]any{"modes": sessionModes(s.mode)}, nil
}

// replay sends a saved conversation as the client first saw it: prompts as
// user_message_chunk, assistant text as agent_message_chunk, and each call's
// tool_call and final tool_call_update as they were sent.
func (a *agent) replay(s *session, msgs []historyMessage) {
	chunk := func(kind string, content any) {
		a.update(s.id, map[string]any{"sessionUpdate": kind, "content": content})
	}
	for _, m := range msgs {
		switch m.Role {
		case roleUser:
			if m.Text != "" {
				chunk("user_message_chunk", map[string]string{"type": "text", "text": m.Text})
			}
			for _, img := range m.Images {
				chunk("user_message_chunk", map[string]string{"type": "image", "mimeType": img.MimeType, "data": img.Data})
			}
		case roleAssistant:
			if m.Text != "" {
				chunk("agent_message_chunk", map[string]string{"type": "text", "text": m.Text})
			}
		case roleTool:
			if len(m.Shown) == 0 {
				status := "failed"
				if m.Status == statusCompleted {
					status = "completed"
				}
				a.update(s.id, map[string]any{"sessionUpdate": "tool_call", "toolCallId": m.CallID, "title": cmp.Or(m.Tool, "tool"), "status": status,
					"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": m.Output}}}})
			}
			for _, raw := range m.Shown {
				if u, err := shownUpdate(raw, m.CallID); err == nil {
					a.update(s.id, u)
				}
			}
		}
	}
}
