// bridge.go owns the prepare bridge, serve's part of the guard's
// contract (DESIGN.md §1): the channel owns the session, the prompt is
// running, exactly one provider call, and the decision log.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"time"
)

// Decision log outcomes that the bridge decides before or after the
// provider; the provider's own failure categories are logged as they are.
const (
	outcomeMalformed        = "malformed_request"
	outcomeIdentityMismatch = "identity_mismatch"
	outcomeStalePrompt      = "stale_prompt"
	outcomeNotConfigured    = "not_configured"
	// An allow turned into a denial because the decision log could not be
	// written: an allow that cannot be logged is a denial (DESIGN.md §3).
	outcomeDecisionLog = "decision_log_failed"
)

// session returns the session with this id if this channel owns it.
func (ch *acpChannel) session(id string) *hostSession {
	ch.d.mu.Lock()
	defer ch.d.mu.Unlock()
	s := ch.d.sessions[id]
	if s == nil || s.ch != ch {
		return nil
	}
	return s
}

// guardPrepareMembers are the members of a child's prepare params, in the
// order prepareParams reads them.
var guardPrepareMembers = []string{"sessionId", "promptId", "toolCallId", "toolName", "arguments", "_meta"}

type guardPrepareParams struct {
	SessionID, PromptID, ToolCallID, ToolName string
	// Arguments are the bytes forwarded to the provider, checked once
	// (checkWireArguments) and never re-encoded.
	Arguments json.RawMessage
}

// prepareParams reads a child's prepare params in one strict walk that
// builds no Go value of the arguments: exact member names, none given twice
// at any depth, every string field present, arguments one object within
// maxWireArguments.
func prepareParams(params json.RawMessage) (guardPrepareParams, error) {
	var p guardPrepareParams
	var m [6]json.RawMessage
	if err := strictMembers(params, guardPrepareMembers, m[:]); err != nil {
		return p, err
	}
	for i, dst := range []*string{&p.SessionID, &p.PromptID, &p.ToolCallID, &p.ToolName} {
		s, err := wireStringValue(m[i])
		if err != nil {
			return p, fmt.Errorf("field %q: %w", guardPrepareMembers[i], err)
		}
		*dst = s
	}
	if m[4] == nil {
		return p, errors.New(`missing field "arguments"`)
	}
	args, err := checkArgumentsBound(m[4])
	p.Arguments = args
	return p, err
}

// prepare answers one child's request for a decision: the channel must own
// the session and the prompt must be the session's active one, or it is
// denied without a provider call; then exactly one provider prepare, and a
// re-check that the prompt is still active before an allow leaves.
func (d *daemon) prepare(ctx context.Context, ch *acpChannel, params json.RawMessage) Decision {
	start := time.Now()
	rec := decisionRecord{}
	record := func(outcome string) error {
		// One clock read for the line's time and its latency.
		now := time.Now()
		rec.Outcome, rec.LatencyUs, rec.Time = outcome, now.Sub(start).Microseconds(), now.UTC().Format(time.RFC3339Nano)
		return d.decisions.write(rec)
	}
	deny := func(outcome, reason string) Decision {
		rec.Reason = deniedReason(reason)
		record(outcome)
		d.obs.decided(outcome)
		return Decision{Allowed: false, Reason: reason}
	}
	p, err := prepareParams(params)
	rec.SessionID, rec.PromptID, rec.ToolCallID, rec.ToolName = p.SessionID, p.PromptID, p.ToolCallID, p.ToolName
	if err == nil {
		// The digest of exactly the bytes forwarded, taken here once (DESIGN.md §8).
		rec.ArgumentsSha256 = argumentsDigest(p.Arguments)
		if d.decisions.arguments {
			rec.Arguments = p.Arguments
		}
	}
	if err != nil || p.ToolName == "" {
		return deny(outcomeMalformed, guardFailedReason)
	}
	s := ch.session(p.SessionID)
	if s == nil {
		return deny(outcomeIdentityMismatch, guardFailedReason)
	}
	job := s.activeJob(p.PromptID)
	if job == nil {
		return deny(s.inactiveOutcome(p.PromptID, nil), guardFailedReason)
	}
	if d.provider == nil {
		return deny(outcomeNotConfigured, guardFailedReason)
	}

	// One context for the provider call: it ends with the handler's (the
	// child's channel, $/cancel_request), with the prompt (job.cancel calls
	// cancel) and at the provider timeout, whose deadline post reuses.
	pctx, cancel := d.provider.callContext(ctx)
	defer cancel()
	if job.track(pctx, cancel) {
		defer job.untrack(pctx)
	} else {
		cancel() // the prompt ended since activeJob: the call is refused unsent
	}
	called := time.Now()
	res := d.provider.prepare(pctx, prepareRequest{SessionID: p.SessionID, PromptID: p.PromptID, ToolCallID: p.ToolCallID, ToolName: p.ToolName, Arguments: p.Arguments})
	d.obs.providerLatency(time.Since(called))
	rec.RequestID = res.RequestID

	if s.activeJob(p.PromptID) != job {
		return deny(s.inactiveOutcome(p.PromptID, job), guardFailedReason)
	}
	switch {
	case res.Category != "":
		if res.Category == failIdentity {
			d.obs.logger().Error("provider identity check failed: call denied", "requestId", res.RequestID, "tool", p.ToolName, "err", res.Err)
		}
		return deny(res.Category, guardFailedReason)
	case !res.Allowed:
		// The reason as given: the child's checkGuard shows the default for a blank one.
		return deny(outcomeDenied, res.Reason)
	}
	if err := record(outcomeAllowed); err != nil {
		// Never an unaudited allow.
		d.obs.decided(outcomeDecisionLog)
		d.obs.logger().Error("decision log failed: allow turned into a denial", "requestId", rec.RequestID, "err", err)
		return Decision{Allowed: false, Reason: guardFailedReason}
	}
	d.obs.decided(outcomeAllowed)
	if d.allowed != nil {
		d.allowed(s, p.PromptID, p.ToolName, p.Arguments)
	}
	return Decision{Allowed: true}
}

// decisionAllowedAnswer is the answer to an allowed prepare
// (decisionAllowedJSON, appendDecision's bytes for an allow), boxed once:
// nothing writes into a handler's result.
var decisionAllowedAnswer any = rpcCompact(decisionAllowedJSON)

// decisionAnswerFrame is the bytes of a denial's answer besides its
// reason (`{"allowed":false,"reason":""}`), a capacity hint; the reason
// is given half its length again for the escapes of "<", ">" and "&".
const decisionAnswerFrame = 30

// decisionAnswer is d as the handler's result: byte for byte what
// json.Marshal of Decision writes (the child reads it with decodeDecision),
// built by appending rather than by reflection once per call.
func decisionAnswer(d Decision) any {
	if d.Allowed && d.Reason == "" {
		return decisionAllowedAnswer
	}
	return rpcCompact(appendDecision(make([]byte, 0, decisionAnswerFrame+len(d.Reason)+len(d.Reason)/2), d))
}

// appendDecision appends d as json.Marshal of Decision writes it: allowed,
// then the reason when it is not empty, escaped as json.Marshal escapes it.
func appendDecision(dst []byte, d Decision) []byte {
	if d.Allowed {
		dst = append(dst, `{"allowed":true`...)
	} else {
		dst = append(dst, `{"allowed":false`...)
	}
	if d.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = appendJSONString(dst, d.Reason, true)
	}
	return append(dst, '}')
}

// activeJob returns the running prompt if its id is promptID and it was
// neither cancelled nor finished.
func (s *hostSession) activeJob(promptID string) *promptJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	job := s.active
	if job == nil || s.ended || promptID == "" || job.id != promptID || job.ctx.Err() != nil {
		return nil
	}
	return job
}

// promptAnswered ends job as the child's answer to it is read, on the
// channel's read goroutine: the child's messages are then applied in the
// order it sent them, and a prepare it wrote after that answer finds the
// prompt over and makes no provider request.
func (s *hostSession) promptAnswered(job *promptJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	job.answered = true
	job.cancel()
}

// inactiveOutcome is the decision-log outcome of a prepare for promptID
// that is not the running prompt (any more): a cancellation when the prompt
// was cancelled while the prepare waited for the provider (job, the prompt
// it was admitted for) or, before that, while the child had not answered it
// yet (job nil); stale_prompt for every other prompt.
func (s *hostSession) inactiveOutcome(promptID string, job *promptJob) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if job == nil {
		if job = s.active; job == nil || job.id != promptID || promptID == "" || job.answered {
			return outcomeStalePrompt
		}
	}
	if job.cancelled {
		return failCancelled
	}
	return outcomeStalePrompt
}

// decisionRecord is one line of the decision log.
type decisionRecord struct {
	Time            string `json:"time"`
	SessionID       string `json:"sessionId"`
	PromptID        string `json:"promptId"`
	ToolCallID      string `json:"toolCallId"`
	RequestID       string `json:"requestId"`
	ToolName        string `json:"toolName"`
	ArgumentsSha256 string `json:"argumentsSha256"`
	Outcome         string `json:"outcome"`
	Reason          string `json:"reason,omitempty"` // what the model and client are shown of a denial
	LatencyUs       int64  `json:"latencyUs"`
	// Arguments are the bytes forwarded, only with --decision-log-arguments:
	// arguments are the sensitive part of a call.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// decisionLog writes one JSON line per decision, whole lines only.
type decisionLog struct {
	lines     *lineLog
	arguments bool // --decision-log-arguments: each line carries the arguments
}

// newDecisionLog writes the decision log to a stream it shares.
func newDecisionLog(w io.Writer) *decisionLog { return &decisionLog{lines: &lineLog{w: w}} }

func (l *decisionLog) write(rec decisionRecord) error {
	if rec.Time == "" {
		rec.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	line := appendDecisionRecord(make([]byte, 0, decisionLineFrame+len(rec.SessionID)+len(rec.PromptID)+len(rec.ToolCallID)+len(rec.ToolName)), rec)
	if err := l.lines.append(line); err != nil {
		return fmt.Errorf("write decision log: %w", err)
	}
	return nil
}

// decisionLineFrame is the bytes of a decision line besides its session,
// prompt, tool call ids and tool name, a capacity hint: the member names,
// the time, the request id, the digest, the outcome and the latency.
const decisionLineFrame = 320

// appendDecisionRecord appends rec as one line, byte for byte what
// json.Marshal of decisionRecord writes (its members in their order, strings
// escaped as it escapes them) and a newline: the shape the log's readers
// decode (DESIGN.md §3), written without reflection once per decision.
func appendDecisionRecord(dst []byte, rec decisionRecord) []byte {
	dst = append(dst, `{"time":`...)
	dst = appendJSONString(dst, rec.Time, true)
	dst = append(dst, `,"sessionId":`...)
	dst = appendJSONString(dst, rec.SessionID, true)
	dst = append(dst, `,"promptId":`...)
	dst = appendJSONString(dst, rec.PromptID, true)
	dst = append(dst, `,"toolCallId":`...)
	dst = appendJSONString(dst, rec.ToolCallID, true)
	dst = append(dst, `,"requestId":`...)
	dst = appendJSONString(dst, rec.RequestID, true)
	dst = append(dst, `,"toolName":`...)
	dst = appendJSONString(dst, rec.ToolName, true)
	dst = append(dst, `,"argumentsSha256":`...)
	dst = appendJSONString(dst, rec.ArgumentsSha256, true)
	dst = append(dst, `,"outcome":`...)
	dst = appendJSONString(dst, rec.Outcome, true)
	if rec.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = appendJSONString(dst, rec.Reason, true)
	}
	dst = append(dst, `,"latencyUs":`...)
	dst = strconv.AppendInt(dst, rec.LatencyUs, 10)
	if len(rec.Arguments) > 0 {
		// Checked JSON, compacted as forwarded: escaped as json.Marshal
		// escapes a RawMessage.
		dst = append(dst, `,"arguments":`...)
		dst = append(dst, htmlEscaped(rec.Arguments)...)
	}
	return append(dst, "}\n"...)
}

// track adds a provider call to the prompt's, or reports false when the
// prompt already ended: the caller then cancels the call itself.
func (j *promptJob) track(ctx context.Context, cancel context.CancelFunc) bool {
	j.prepareMu.Lock()
	defer j.prepareMu.Unlock()
	if j.over {
		return false
	}
	if j.prepares == nil {
		j.prepares = j.prepareRoom[:0]
	}
	j.prepares = append(j.prepares, inflightPrepare{ctx, cancel})
	return true
}

// untrack removes a provider call that returned.
func (j *promptJob) untrack(ctx context.Context) {
	j.prepareMu.Lock()
	defer j.prepareMu.Unlock()
	for i, c := range j.prepares {
		if c.ctx == ctx {
			last := len(j.prepares) - 1
			j.prepares[i] = j.prepares[last]
			j.prepares[last] = inflightPrepare{}
			j.prepares = j.prepares[:last]
			return
		}
	}
}

func (o *serveObserver) logger() *slog.Logger {
	if o == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.log
}

// decided counts one prepare by its decision log outcome.
func (o *serveObserver) decided(outcome string) {
	if o == nil {
		return
	}
	switch outcome {
	case outcomeAllowed:
		o.decisions[decisionAllowed].Add(1)
		return
	case outcomeDenied:
		o.decisions[decisionDenied].Add(1)
		return
	}
	o.decisions[decisionFailed].Add(1)
	if i := slices.Index(serveFailureCategories[:], outcome); i >= 0 {
		o.failures[i].Add(1)
	}
}

func (o *serveObserver) providerLatency(d time.Duration) {
	if o != nil {
		o.latency.observe(d)
	}
}
