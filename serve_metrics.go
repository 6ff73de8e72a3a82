// serve_metrics.go owns what "acpguard serve" tells its operator: the
// slog log and GET /metrics (decisions, provider latency, sessions,
// prompts, tool executions, children and limit hits), written with
// metrics.go's writer.
package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Decisions as the host's tool call sees them.
const (
	decisionAllowed = iota
	decisionDenied  // the provider said no
	decisionFailed  // no decision: see the failure category
	decisionKinds
)

var serveDecisionNames = [decisionKinds]string{"allowed", "denied", "failed"}

// serveFailureCategories are the reasons a prepare ended without a
// decision: the provider client's categories, then the bridge's own.
var serveFailureCategories = [...]string{
	failTimeout, failCancelled, failTransport, failHTTPStatus, failContentType,
	failOversizeRequest, failOversizeResponse, failMalformedJSON, failSchema,
	failVersion, failIDMismatch, failUnsafeReason, failIdentity,
	outcomeMalformed, outcomeIdentityMismatch, outcomeStalePrompt, outcomeNotConfigured, outcomeDecisionLog,
}

// Results of a prompt: the ACP stop reasons, a turn_error, and anything
// else a child answered.
const (
	promptResultError = "error"
	promptResultOther = "other"
)

var servePromptResults = [...]string{"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", promptResultError, promptResultOther}

// serveLimitCodes are the limits a caller can hit, by the code it sees (or,
// for limits that end something rather than refuse it, the code logged).
// serveAuthFailures label auth_failures_total: why a host request was
// refused 401 (bearerFailure).
var serveAuthFailures = [...]string{authNoHeader, authScheme, authToken}

var serveLimitCodes = [...]string{
	codeSessionLimit, codeQueueFull, codeTooLarge, codePromptTooLarge,
	codeSubscriberLimit, limitSubscriberDropped, codeInitializeTimeout,
	limitPromptDeadline, limitPermissionTimeout, limitSessionIdle,
	limitEventMemory,
	limitModelCalls, limitModelBytes,
}

// Tool execution labels beyond maxToolSeries, or not canonical, and the
// status of a failed one.
const (
	toolLabelOther   = "other"
	toolStatusFailed = "failed"
)

// serveObserver is the daemon's log and counters. A nil *serveObserver
// observes nothing, so a daemon assembled by hand (the fuzz tests) works.
type serveObserver struct {
	log *slog.Logger

	decisions       [decisionKinds]atomic.Int64
	failures        [len(serveFailureCategories)]atomic.Int64
	latency         latencyHistogram
	sessionsCreated atomic.Int64
	prompts         [len(servePromptResults)]atomic.Int64
	childrenStarted atomic.Int64
	childrenDied    atomic.Int64
	limits          [len(serveLimitCodes)]atomic.Int64
	authFailures    [len(serveAuthFailures)]atomic.Int64
	maxChildren     int // --max-children, set before serving

	toolMu sync.Mutex
	tools  map[toolSeries]int64
	// toolLabels holds each tool label of a series in tools, as a key
	// its bytes find without a conversion.
	toolLabels map[string]string

	sandbox sandboxInForce // set once at start, before the listener opens
	events  *eventBudget   // nil until the daemon sets it: nothing held
}

type toolSeries struct{ tool, status string }

func newServeObserver(log *slog.Logger) *serveObserver {
	return &serveObserver{log: log, tools: map[toolSeries]int64{}, toolLabels: map[string]string{}}
}

// authFailed counts and logs one host request refused for its
// Authorization header, why naming what was wrong (never the header).
func (o *serveObserver) authFailed(why string, r *http.Request) {
	if o == nil {
		return
	}
	if i := slices.Index(serveAuthFailures[:], why); i >= 0 {
		o.authFailures[i].Add(1)
	}
	o.log.Warn("host request unauthorized", "reason", why, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
}

// limitHit counts and logs one hit of the limit named by code.
func (o *serveObserver) limitHit(code string, attrs ...any) {
	if o == nil {
		return
	}
	if i := slices.Index(serveLimitCodes[:], code); i >= 0 {
		o.limits[i].Add(1)
	}
	o.log.Warn("limit reached", append([]any{"code", code}, attrs...)...)
}

func (o *serveObserver) promptEnded(result string) {
	if o == nil {
		return
	}
	i := slices.Index(servePromptResults[:], result)
	if i < 0 {
		i = slices.Index(servePromptResults[:], promptResultOther)
	}
	o.prompts[i].Add(1)
}

// toolUpdate counts a tool execution when a child reports its end: a
// tool_call_update whose status is completed or failed. Read loosely: a
// counter decides nothing. It runs for every session/update, so it reads
// the three members it needs as bytes where they need no unescaping and
// allocates nothing for a tool it has counted before.
func (o *serveObserver) toolUpdate(update json.RawMessage) {
	if o == nil || !bytes.Contains(update, []byte(`"tool_call_update"`)) {
		return
	}
	// Only three members are read: the update is walked, not decoded. Each
	// is a string's content, nil when absent or not a string; a later
	// member of the same name wins, as in a decoding.
	var kind, status, toolName []byte
	w := wireWalk{data: update}
	err := w.objectBytes(func(key []byte) error {
		switch string(key) {
		case "sessionUpdate":
			kind = wireWalkStringBytes(&w)
		case "status":
			status = wireWalkStringBytes(&w)
		case "_meta":
			meta := w.value()
			if string(meta) == "null" {
				return nil
			}
			mw := wireWalk{data: meta}
			return mw.objectBytes(func(key []byte) error {
				if string(key) == "toolName" {
					toolName = wireWalkStringBytes(&mw)
				} else {
					mw.value()
				}
				return nil
			})
		default:
			w.value()
		}
		return nil
	})
	if err != nil || string(kind) != "tool_call_update" {
		return
	}
	var st string
	switch string(status) {
	case "completed":
		st = "completed"
	case toolStatusFailed:
		st = toolStatusFailed
	default:
		return
	}
	o.toolEnded(toolName, st)
}

// toolEnded counts one execution of the tool named name (bytes of a
// decoded string) that ended with status.
func (o *serveObserver) toolEnded(name []byte, status string) {
	ok := toolLabelOK(name)
	o.toolMu.Lock()
	defer o.toolMu.Unlock()
	tool, seen := toolLabelOther, false
	if ok {
		// m[string(b)] converts nothing: a counted tool costs no allocation.
		tool, seen = o.toolLabels[string(name)]
		if !seen {
			tool = string(name)
		}
	}
	key := toolSeries{tool, status}
	if _, counted := o.tools[key]; !counted {
		if len(o.tools) >= maxToolSeries {
			key.tool = toolLabelOther
		} else if ok && !seen {
			o.toolLabels[tool] = tool
		}
	}
	o.tools[key]++
}

// wireWalkStringBytes moves w past the value at its position and returns
// the content of a JSON string, unescaped (aliasing w's data where it needs
// no unescaping), else nil.
func wireWalkStringBytes(w *wireWalk) []byte {
	raw := w.value()
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner
	}
	s, err := wireStringValue(raw)
	if err != nil {
		return nil
	}
	return []byte(s)
}

// toolLabelOK accepts the characters of canonical and MCP tool names, which
// need no escaping in a label value.
func toolLabelOK(name []byte) bool {
	if len(name) == 0 || len(name) > maxToolLabelLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func (o *serveObserver) sessionCreated() {
	if o != nil {
		o.sessionsCreated.Add(1)
	}
}

func (o *serveObserver) childStarted() {
	if o != nil {
		o.childrenStarted.Add(1)
	}
}

func (o *serveObserver) childDied() {
	if o != nil {
		o.childrenDied.Add(1)
	}
}

func (d *daemon) handleMetrics(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	live, children := d.liveSessionsLocked(), len(d.chans)
	d.mu.Unlock()
	writeMetrics(w, d.obs.render(live, children))
}

// render writes every metric and every fixed label value from the start.
func (o *serveObserver) render(liveSessions, liveChildren int) []byte {
	var b promWriter
	b.counters("acpguard_serve_decisions_total", "Guard decisions sent to ACP children, by outcome.", "outcome", serveDecisionNames[:], o.decisions[:])
	b.counters("acpguard_serve_decision_failures_total", "Guard decisions that failed closed, by failure category.", "category", serveFailureCategories[:], o.failures[:])
	b.histogram("acpguard_serve_provider_request_duration_seconds", "Time of one provider prepare call, from request to answer or failure.", &o.latency)
	b.single("acpguard_serve_sessions", "gauge", "Live sessions.", int64(liveSessions))
	b.single("acpguard_serve_sessions_created_total", "counter", "Sessions created.", o.sessionsCreated.Load())
	b.counters("acpguard_serve_prompts_total", "Prompts that ended, by stop reason, or error.", "result", servePromptResults[:], o.prompts[:])
	b.family("acpguard_serve_tool_executions_total", "counter", "Tool calls the ACP children reported ended, by tool and status.")
	o.toolMu.Lock()
	keys := make([]toolSeries, 0, len(o.tools))
	for k := range o.tools {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b toolSeries) int {
		return cmp.Or(cmp.Compare(a.tool, b.tool), cmp.Compare(a.status, b.status))
	})
	for _, k := range keys {
		b.sample("acpguard_serve_tool_executions_total", o.tools[k], "tool", k.tool, "status", k.status)
	}
	o.toolMu.Unlock()
	b.single("acpguard_serve_children", "gauge", "Live ACP children.", int64(liveChildren))
	b.single("acpguard_serve_max_children", "gauge", "The most ACP children serve runs (--max-children).", int64(o.maxChildren))
	b.single("acpguard_serve_children_started_total", "counter", "ACP children started.", o.childrenStarted.Load())
	b.single("acpguard_serve_children_died_total", "counter", "ACP children that exited without the daemon ending them.", o.childrenDied.Load())
	b.counters("acpguard_serve_auth_failures_total", "Host requests refused for their Authorization header, by reason.", "reason", serveAuthFailures[:], o.authFailures[:])
	b.counters("acpguard_serve_limit_hits_total", "Times a limit refused or ended something, by code.", "code", serveLimitCodes[:], o.limits[:])
	writeSandboxMetrics(&b, o.sandbox)
	b.single("acpguard_serve_event_memory_bytes", "gauge", "Bytes of events held by every session's replay ring, stream queues and stream writes in progress.", o.events.heldBytes())
	b.single("acpguard_serve_event_streams", "gauge", "Event streams being written.", o.events.runningStreams())
	return b.Bytes()
}
