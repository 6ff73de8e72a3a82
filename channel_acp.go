// channel_acp.go owns the ACP v1 vocabulary both ends of the private
// channel speak: the method names and limits, the managed-mode _meta keys
// and the decision request, the stop reasons, the permission request's
// options and outcomes, a prompt's content blocks and the invocation serve
// binds to a prompt, what prompt text is a slash command, and the flags
// serve gives a child. The agent (acp.go)
// and serve each take these names from here, never from the other's files.
package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ACP v1 wire names and limits: JSON-RPC 2.0, one message per line.
const (
	acpProtocolVersion = 1
	// acpMaxLine bounds one incoming ACP message (DESIGN.md §6).
	acpMaxLine = 8 << 20
	// maxImageBytes bounds one image block's decoded data (DESIGN.md §6):
	// vision model services refuse images past a few MiB, so a bigger one
	// is refused before its turn starts rather than by the model after it;
	// base64 of this many bytes still fits in one acpMaxLine message.
	maxImageBytes = 5 << 20

	methodInitialize     = "initialize"
	methodSessionNew     = "session/new"
	methodSessionPrompt  = "session/prompt"
	methodSessionCancel  = "session/cancel"
	methodSessionSetMode = "session/set_mode"
	methodSessionClose   = "session/close"
	methodSessionLoad    = "session/load"
	methodSessionUpdate  = "session/update"
)

// Managed-mode wire names, kept from Qwen Code so a host written for it works
// unchanged. Qwen Code's parent also sends a capability in initialize
// _meta["qwen-code/private-parent-capability"]; serve sends none, and a
// child ignores one: the socket pair is what proves the parent (channel.go).
const (
	// the managed child acknowledges required-v1 in its initialize result (DESIGN.md §4)
	metaGuardReady = "qwen-code/external-tool-guard-ready"
	// serve's session and prompt ids, in session/prompt _meta (DESIGN.md §2)
	metaInvocation = "qwen-code/invocation"
	// metaSessionID in session/new _meta is the session id serve generated
	// (DESIGN.md §2). Any client may name its id so; a taken or malformed
	// one is refused.
	metaSessionID = "acpguard/session-id"
	// metaSessionDeleted true in session/close _meta says serve's host
	// deleted the session, which fires the child's SessionDelete hooks.
	metaSessionDeleted = "acpguard/session-deleted"
	// the child's decision request to serve (DESIGN.md §4, §8)
	methodGuardPrepare = "_qwen/control/external_tool_guard/prepare"
	// decisionAllowedJSON is serve's answer to every allowed prepare, the
	// same bytes each time, which the child reads without a decode.
	decisionAllowedJSON = `{"allowed":true}`
	invocationVersion   = 1
)

// A running shell command's live output (DESIGN.md §7): the agent sends it
// to its client as a tool_call_update in_progress whose content is the end
// of the output so far and whose _meta[metaShellOutput] is
// liveOutputMeta; serve shows it to its hosts as Qwen Code's live output
// event, a session_update of sessionUpdateShellOutput whose output is the
// chunk. liveOutputUpdatePrefix is how such an update begins, as the agent
// encodes it (members in key order).
const (
	metaShellOutput          = "shellOutput"
	sessionUpdateShellOutput = "shell_output"
	liveOutputUpdatePrefix   = `{"_meta":{"provenance":"builtin","shellOutput":`
)

// liveOutputMeta is _meta[metaShellOutput] of a live update: the output
// printed since the previous one, and how many bytes before it were left
// out by the live view's bound (the final result has them).
type liveOutputMeta struct {
	Chunk   string `json:"chunk"`
	Skipped int64  `json:"skipped"`
}

// methodSessionBackground is a child's notification to serve that a
// session's background shell processes started running or all ended
// (sessionBackgroundParams): serve answers hasRunningBackgroundTasks from
// the one of highest seq. It is sent only to a client whose initialize
// asked for it (metaBackgroundReports in clientCapabilities' _meta), as
// serve's does: an editor never gets it.
const methodSessionBackground = "_acpguard/session/background"

// metaBackgroundReports is the clientCapabilities _meta key by which a
// client asks for methodSessionBackground.
const metaBackgroundReports = "acpguard/background-reports"

type sessionBackgroundParams struct {
	SessionID string `json:"sessionId"`
	Running   bool   `json:"running"`
	Seq       uint64 `json:"seq"`
}

// ACP stop reasons.
const (
	stopEndTurn         = "end_turn"
	stopMaxTurnRequests = "max_turn_requests"
	stopCancelled       = "cancelled"
)

// session/request_permission, its options and outcomes (ACP v1). The
// option ids, names and kinds are Qwen Code's, so a client or host written
// for it answers unchanged (DESIGN.md §7). An always answer is remembered
// for the session, in memory only, whatever its name says.
const (
	methodRequestPermission    = "session/request_permission"
	optionProceedOnce          = "proceed_once"
	optionProceedAlways        = "proceed_always"         // edits
	optionProceedAlwaysProject = "proceed_always_project" // shell, MCP and the rest
	optionCancel               = "cancel"
	kindAllowOnce              = "allow_once"
	kindAllowAlways            = "allow_always"
	kindRejectOnce             = "reject_once"
	outcomeSelected            = "selected"
	outcomeCancelled           = "cancelled"
)

// legacyOptionKinds are the option ids acpguard offered before it took
// Qwen Code's, each naming the kind of option it stands for. Answers and
// host votes naming one are still accepted, for one release, so that
// clients and hosts written against acpguard keep working while they move
// to Qwen's ids.
var legacyOptionKinds = map[string]string{
	"allow_once":   kindAllowOnce,
	"allow_always": kindAllowAlways,
	"reject_once":  kindRejectOnce,
}

// chosenOption is the offered option an answer or a vote names, directly
// or by a legacy id; nil when it names none of them.
func chosenOption[O any](offered []O, id string, idKind func(O) (string, string)) *O {
	for i := range offered {
		if oid, _ := idKind(offered[i]); oid == id {
			return &offered[i]
		}
	}
	if kind, ok := legacyOptionKinds[id]; ok {
		for i := range offered {
			if _, k := idKind(offered[i]); k == kind {
				return &offered[i]
			}
		}
	}
	return nil
}

// contentBlock is an ACP ContentBlock; the agent accepts text,
// resource_link and image.
type contentBlock struct {
	Type        string          `json:"type"`
	Text        string          `json:"text,omitempty"`
	URI         string          `json:"uri,omitempty"`
	Name        string          `json:"name,omitempty"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MimeType    string          `json:"mimeType,omitempty"`
	Size        *int64          `json:"size,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
	// An image's base64 data; read raw so that check can name the type of
	// an audio block too.
	Data json.RawMessage `json:"data,omitempty"`
	// Members of the resource type this agent does not take, read only so
	// that check can name the type.
	Resource json.RawMessage `json:"resource,omitempty"`
}

// imageMimeTypes are the image types a prompt may carry: the ones vision
// model services take.
var imageMimeTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// check refuses a block the agent cannot read; serve applies it before it
// accepts a prompt, so a host learns of a bad block from its 400.
func (b contentBlock) check() error {
	switch {
	case b.Type == "image":
		_, err := b.image()
		return err
	case b.Type != "text" && b.Type != "resource_link":
		return fmt.Errorf("unsupported content type %q (text, resource_link and image are)", b.Type)
	case b.Type == "resource_link" && b.URI == "":
		return errors.New("a resource_link without a uri")
	}
	return nil
}

// image returns an image block's picture, its data checked: one of
// imageMimeTypes, standard base64 with padding and no line breaks, at most
// maxImageBytes decoded. The block's uri is not read.
func (b contentBlock) image() (promptImage, error) {
	if !slices.Contains(imageMimeTypes, b.MimeType) {
		return promptImage{}, fmt.Errorf("image mimeType %q is not supported (want one of %s)", b.MimeType, strings.Join(imageMimeTypes, ", "))
	}
	var data string
	if err := json.Unmarshal(b.Data, &data); err != nil || data == "" {
		return promptImage{}, errors.New("image data must be a non-empty base64 string")
	}
	if len(data) > base64.StdEncoding.EncodedLen(maxImageBytes) {
		n := base64.StdEncoding.DecodedLen(len(data)) - (len(data) - len(strings.TrimRight(data, "=")))
		return promptImage{}, imageTooLarge(n)
	}
	if i := strings.IndexAny(data, "\r\n"); i >= 0 {
		return promptImage{}, fmt.Errorf("image data is not standard base64: line break at input byte %d", i)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(data)
	if err != nil {
		return promptImage{}, fmt.Errorf("image data is not standard base64: %v", err)
	}
	if len(raw) > maxImageBytes {
		return promptImage{}, imageTooLarge(len(raw))
	}
	return promptImage{MimeType: b.MimeType, Data: data}, nil
}

// imageTooLarge is the error for an image of n bytes decoded.
func imageTooLarge(n int) error {
	return fmt.Errorf("image data is %d bytes decoded, more than %d (5 MiB) per image", n, maxImageBytes)
}

// empty reports whether the block says nothing; an image always says
// something.
func (b contentBlock) empty() bool {
	return b.Type != "image" && strings.TrimSpace(b.Text) == "" && b.URI == ""
}

// invocation is the runtime-owned identity a managed parent binds to a prompt.
type invocation struct {
	Version   int    `json:"version"`
	SessionID string `json:"sessionId"`
	PromptID  string `json:"promptId"`
}

// The flags of a child's command line that serve sets itself: its state
// directory (off: serve keeps no child's sessions), its system prompt
// file, the operator's, and the settings files switches of acp and serve
// (settings_files.go), which serve passes on so that each child reads the
// files serve read.
const (
	flagStateDir               = "state-dir"
	stateDirOff                = "off"
	flagSystemPromptFile       = "system-prompt-file"
	flagNoUserSettings         = "no-user-settings"
	flagTrustWorkspaceSettings = "trust-workspace-settings"
)

// systemPromptSource is where the session prompts' base text comes from:
// Text "" is the built-in prompt.
type systemPromptSource struct {
	Text string
	File string // the file Text was read from, for serve's children
}

// slashCommand reports the command name of a prompt text that is a slash
// command: after any leading white space, "/" and a command word
// ([A-Za-z][A-Za-z0-9_-]*) followed by white space or the end of the text.
// Anything else that starts with "/" (a path such as /tmp/notes.txt, //host,
// "/ x", "/1abc") is text for the model. Slash commands run outside the tool
// scheduler, so in required mode serve refuses them unless the operator
// opened one by name; the ACP child decides with this same function, so a
// text serve lets through as plain is plain there too.
func slashCommand(text string) (string, bool) {
	t, ok := strings.CutPrefix(strings.TrimLeftFunc(text, unicode.IsSpace), "/")
	if !ok {
		return "", false
	}
	n := 0
	for n < len(t) && isCommandWordByte(t[n], n == 0) {
		n++
	}
	if next, _ := utf8.DecodeRuneInString(t[n:]); n == 0 || n < len(t) && !unicode.IsSpace(next) {
		return "", false
	}
	return t[:n], true
}

// isCommandWordByte reports whether c may stand in a command word, at its
// start when first is true: a letter first, then letters, digits, '_', '-'.
func isCommandWordByte(c byte, first bool) bool {
	letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	return letter || !first && (c >= '0' && c <= '9' || c == '_' || c == '-')
}
