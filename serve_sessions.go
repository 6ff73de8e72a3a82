// serve_sessions.go owns serve's host sessions: creation, the prompt queue
// each runs in FIFO order, cancellation, the permission relay to the host,
// the prompt deadline and the idle reaper.
//
// Identity: a host sessionId is the ACP sessionId that the daemon's own
// private child returned from session/new. serve generates the id and the
// child adopts it (DESIGN.md §2), so the id the host sees, the id the child
// sends back in a prepare request and the id the provider sees are one and
// the same; the daemon refuses an id that is
// malformed or already registered, and binds each id to the channel that
// created it. promptId and the provider requestId are generated here.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// hostSession is one host session: one ACP session on one channel.
type hostSession struct {
	d      *daemon
	id     string
	ch     *acpChannel
	events *streamLog
	// ws is the session's workspace; single marks the workspace's
	// default session, which single-scope creations attach to.
	ws      string
	single  bool
	created time.Time
	modes   []string // the approval modes the child offered in session/new
	// model is the model name and call bound of its prompts, from its
	// workspace's settings as serve read them (serve_model.go).
	model sessionModel
	// modelChecked is what the check of its model calls keeps between
	// them (serve_model.go).
	modelChecked modelChecked
	// mcp is its remote MCP servers, reached by serve for its child
	// (serve_mcp.go); nil until the child lists one.
	mcp *serveMCP

	mu      sync.Mutex
	ended   bool // closed by the host, or its child died
	dead    bool // its child died
	queue   []*promptJob
	active  *promptJob
	running bool // a runner goroutine owns the queue
	perms   map[string]*hostPendingPermission
	// lastUsed is the time of the last host request or prompt end, for
	// the idle reaper.
	lastUsed time.Time
	clients  map[string]bool // the client ids POST /session handed out or was named
	// resolvedPerms are the newest permission requests resolved, at most
	// maxResolvedPerms: a late vote for one is told on the stream.
	resolvedPerms []string

	// background is the child's newest report of the session's background
	// shell processes (methodSessionBackground): its seq shifted left by
	// one, and 1 when some run.
	background atomic.Uint64
}

// noteBackground keeps the child's report numbered seq unless a newer one
// was kept: reports sent from different goroutines may arrive out of order.
func (s *hostSession) noteBackground(seq uint64, running bool) {
	v := seq << 1
	if running {
		v |= 1
	}
	for {
		old := s.background.Load()
		if old>>1 >= seq || s.background.CompareAndSwap(old, v) {
			return
		}
	}
}

// backgroundRunning reports whether a background shell process of the
// session runs, as its child last said.
func (s *hostSession) backgroundRunning() bool { return s.background.Load()&1 == 1 }

// maxResolvedPerms bounds the resolved request ids a session remembers.
const maxResolvedPerms = 64

// promptJob is one queued or running prompt.
type promptJob struct {
	id     string
	blocks []json.RawMessage
	// ctx is done once the prompt is cancelled or finished; a prepare
	// decided for it must not be answered with an allow after that.
	ctx  context.Context
	stop context.CancelFunc // ends ctx; cancel also ends the prepares
	// prepares are the cancel funcs of the provider calls in flight for
	// this prompt, under prepareMu, which is never held while taking
	// another lock; over once ctx ended: cancel called them all.
	prepareMu sync.Mutex
	prepares  []inflightPrepare
	over      bool
	// prepareRoom holds prepares while a prompt has few calls in flight
	// at once, the common case: tracking them allocates nothing.
	prepareRoom [2]inflightPrepare
	// answered: the child's answer to the prompt was read; cancelled: the
	// host, a deadline or the end of the session cancelled it before that.
	// Each is set before ctx ends, under the session's mu; they tell a
	// prepare for a cancelled prompt from one for a finished prompt.
	answered, cancelled bool
	// sent: session/prompt was written to the child. A cancel before that
	// is told to the child once it is, never ahead of it (DESIGN.md §7).
	sent  bool
	model modelBudget // the model calls serve made for it
	// started is when the runner took the prompt; cancelledAt when it
	// was cancelled, for turn_complete's promptCancelled (DESIGN.md §7).
	started, cancelledAt time.Time
	// lastEventID is the session log's newest id when the prompt was
	// queued: every event of its turn has a larger one (DESIGN.md §7).
	lastEventID int64
	// clientID is the X-Qwen-Client-Id of the prompt's sender, "" when it
	// named none: the originator of its turn's permission_request and
	// prompt_cancelled (DESIGN.md §7).
	clientID string
}

// inflightPrepare is one provider call a prompt ends: its context names
// it, its cancel stops it.
type inflightPrepare struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// cancel ends the prompt's ctx and then every provider call in flight for
// it: a prompt that ends stops the provider requests made for it (DESIGN.md
// §1), at once, on the goroutine that ends it.
func (j *promptJob) cancel() {
	j.stop()
	j.prepareMu.Lock()
	calls := j.prepares
	j.prepares, j.over = nil, true
	j.prepareMu.Unlock()
	for _, c := range calls {
		c.cancel()
	}
}

type hostPendingPermission struct {
	options  []hostPermissionOption // as the child offered them
	resolved chan permissionVote    // capacity 1
	promptID string                 // the turn that asked
	toolCall json.RawMessage        // as the child sent it, for the console
}

// permissionVote is how a permission request was resolved, and by which
// client ("" for none, or a cancel).
type permissionVote struct {
	out   hostVoteOutcome
	voter string
}

// voteCancelled is the answer to a permission request that got no vote.
var voteCancelled = hostVoteOutcome{Outcome: "cancelled"}

// cancelPermsLocked answers every pending permission request cancelled;
// s.mu is held.
func (s *hostSession) cancelPermsLocked() {
	for id, p := range s.perms {
		s.resolveLocked(id, p, permissionVote{out: voteCancelled})
	}
}

// resolveLocked answers the pending request id with v, publishes its
// permission_resolved, and remembers it resolved; s.mu is held. Publishing
// here, not in the asking goroutine, keeps the event after what caused it
// (a prompt_cancelled) and before what follows it (the tool's updates, the
// turn's end), as Qwen Code orders them (DESIGN.md §7).
func (s *hostSession) resolveLocked(id string, p *hostPendingPermission, v permissionVote) {
	delete(s.perms, id)
	s.events.publishFrom(eventPermissionResolved, p.promptID, v.voter, permissionResolvedEvent{RequestID: id, SessionID: s.id, Outcome: v.out, VoterClientID: v.voter})
	p.resolved <- v
	if len(s.resolvedPerms) >= maxResolvedPerms {
		s.resolvedPerms = slices.Delete(s.resolvedPerms, 0, 1)
	}
	s.resolvedPerms = append(s.resolvedPerms, id)
}

// hasPermission reports whether the session has the request id pending or
// resolved lately.
func (s *hostSession) hasPermission(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perms[id] != nil || slices.Contains(s.resolvedPerms, id)
}

// addClient registers a client id a host request named; "" is none.
func (s *hostSession) addClient(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	s.clients[id] = true
	s.mu.Unlock()
}

func (s *hostSession) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// Session scopes of POST /session, Qwen Code's (DESIGN.md §7).
const (
	scopeSingle = "single"
	scopeThread = "thread"
)

// hostApprovalModes are the approval modes a host may ask for, Qwen Code's.
// The child has no classifier, so "auto" runs as "default": it asks where
// auto would have asked its classifier (approvalModeForChild).
var hostApprovalModes = []string{modePlan, modeDefault, modeAutoEdit, modeAuto, modeYolo}

const modeAuto = "auto"

// sessionRequest is what a POST /session asks for.
type sessionRequest struct {
	ws       string
	scope    string // scopeSingle or scopeThread
	id       string // the host's session id; "" generates one
	mode     string // an approval mode of hostApprovalModes, or ""
	clientID string // "" mints one
}

// sessionOpened is the answer to a POST /session.
type sessionOpened struct {
	s             *hostSession
	attached      bool
	clientID      string
	activePrompt  bool
	createdAtTime time.Time
}

// openSession creates a session, or attaches to the workspace's default
// one: a single-scope request without a session id attaches to the live
// default session, or creates it (DESIGN.md §7).
func (d *daemon) openSession(ctx context.Context, req sessionRequest) (sessionOpened, *hostError) {
	if req.clientID == "" {
		req.clientID = "client_" + newUUID()
	}
	if req.scope != scopeSingle || req.id != "" {
		s, herr := d.newSession(ctx, req.ws, req.id, req.mode, false)
		if herr != nil {
			return sessionOpened{}, herr
		}
		return s.opened(false, req.clientID), nil
	}
	d.singleMu.Lock()
	defer d.singleMu.Unlock()
	if s := d.defaultSession(req.ws); s != nil {
		if req.mode != "" {
			if herr := s.setMode(ctx, req.mode); herr != nil {
				return sessionOpened{}, herr
			}
		}
		s.touch()
		return s.opened(true, req.clientID), nil
	}
	s, herr := d.newSession(ctx, req.ws, "", req.mode, true)
	if herr != nil {
		return sessionOpened{}, herr
	}
	return s.opened(false, req.clientID), nil
}

// defaultSession is the workspace's live single-scope session, if any: a
// deleted, reaped or dead one no longer counts.
func (d *daemon) defaultSession(ws string) *hostSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sessions {
		if s.single && s.ws == ws && !s.isEnded() {
			return s
		}
	}
	return nil
}

// opened registers clientID on the session and describes it to the host.
func (s *hostSession) opened(attached bool, clientID string) sessionOpened {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[clientID] = true
	return sessionOpened{s: s, attached: attached, clientID: clientID, activePrompt: s.active != nil, createdAtTime: s.created}
}

// approvalModeForChild is the mode the child is told for a host's mode:
// itself where the child offers it, "default" for an "auto" it lacks.
func approvalModeForChild(mode string, offered []string) string {
	if mode == modeAuto && !slices.Contains(offered, modeAuto) {
		return modeDefault
	}
	return mode
}

// setMode switches the live session's approval mode with ACP's
// session/set_mode.
func (s *hostSession) setMode(ctx context.Context, mode string) *hostError {
	return setChildMode(ctx, s.ch, s.id, approvalModeForChild(mode, s.modes))
}

func setChildMode(ctx context.Context, ch *acpChannel, id, mode string) *hostError {
	cctx, cancel := context.WithTimeout(ctx, childCallTimeout)
	defer cancel()
	if _, err := ch.conn.call(cctx, methodSessionSetMode, map[string]string{"sessionId": id, "modeId": mode}); err != nil {
		return childUnavailable("set approval mode: the ACP child refused session/set_mode %q for session %q: %v", mode, id, err)
	}
	return nil
}

// invalidSessionID is the 400 for a host session id that is no UUID or is
// in use (DESIGN.md §7).
func invalidSessionID(format string, a ...any) *hostError {
	return &hostError{http.StatusBadRequest, codeInvalidSessionID, fmt.Sprintf(format, a...)}
}

// newSession creates a session in ws: with the host's id unless id is "",
// in the host's approval mode unless mode is "", the workspace's default
// session when single.
func (d *daemon) newSession(ctx context.Context, ws, id, mode string, single bool) (*hostSession, *hostError) {
	hostID := id != ""
	if hostID {
		d.mu.Lock()
		_, taken := d.sessions[id]
		d.mu.Unlock()
		if taken {
			return nil, invalidSessionID("create session: session id %q is already in use; omit sessionId or pick another", id)
		}
	}
	// A creation holds its place against --max-sessions from here on, so
	// concurrent ones cannot overshoot, nor leave an ACP session behind.
	d.mu.Lock()
	if live := d.liveSessionsLocked() + d.creating; live >= d.limits.MaxSessions {
		d.mu.Unlock()
		d.obs.limitHit(codeSessionLimit, "sessions", live)
		return nil, &hostError{http.StatusServiceUnavailable, codeSessionLimit, fmt.Sprintf("create session: %d sessions, the limit (--max-sessions); delete one or retry later", d.limits.MaxSessions)}
	}
	d.creating++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.creating--
		d.mu.Unlock()
	}()
	ch, herr := d.channelFor(ctx)
	if herr != nil {
		return nil, herr
	}
	defer d.placed(ch)
	// The child holds no variable serve has hidden before it runs anything
	// of this session (serve_secrets.go).
	d.tellHidden(ch)
	// serve generates the id, or takes the host's (DESIGN.md §2); the
	// child is told which.
	if id == "" {
		id = randomHex(randomIDBytes)
	}
	cctx, cancel := context.WithTimeout(ctx, childCallTimeout)
	defer cancel()
	// The child lists its remote MCP servers' tools during session/new.
	pendingMCP := d.expectMCP(ch, id, ws)
	defer d.dropMCP(id, pendingMCP)
	raw, err := ch.conn.call(cctx, "session/new", map[string]any{"cwd": ws, "mcpServers": []any{}, "_meta": map[string]string{metaSessionID: id}})
	if err != nil {
		return nil, childUnavailable("create session: the ACP child refused session/new: %v", err)
	}
	var res struct {
		SessionID     string          `json:"sessionId"`
		Modes         json.RawMessage `json:"modes"`
		Models        json.RawMessage `json:"models"`
		ConfigOptions json.RawMessage `json:"configOptions"`
		Meta          json.RawMessage `json:"_meta"`
	}
	if err := decodeStrict(raw, &res); err != nil || res.SessionID != id {
		return nil, childUnavailable("create session: the ACP child answered session/new with %q, not the session id %q the daemon generated", truncateForError(raw), id)
	}
	var offered struct {
		AvailableModes []struct {
			ID string `json:"id"`
		} `json:"availableModes"`
	}
	json.Unmarshal(res.Modes, &offered)
	var modes []string
	for _, m := range offered.AvailableModes {
		modes = append(modes, m.ID)
	}
	if mode != "" {
		if herr := setChildMode(ctx, ch, id, approvalModeForChild(mode, modes)); herr != nil {
			cctx, cancel := context.WithTimeout(context.Background(), childStopGrace)
			defer cancel()
			ch.conn.call(cctx, methodSessionClose, map[string]string{"sessionId": id})
			return nil, herr
		}
	}
	model, err := d.sessionModelOf(ws)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), childStopGrace)
		defer cancel()
		ch.conn.call(cctx, methodSessionClose, map[string]string{"sessionId": id})
		return nil, &hostError{http.StatusBadRequest, codeBadRequest, "create session: " + err.Error()}
	}
	events := newBoundedStreamLog(d.limits.EventRingSize, d.limits.MaxSubscribers, d.events, func(code string, attrs ...any) {
		d.obs.limitHit(code, append([]any{"sessionId", res.SessionID}, attrs...)...)
	})
	now := time.Now()
	s := &hostSession{d: d, id: res.SessionID, ch: ch, events: events, ws: ws, single: single, created: now, modes: modes, model: model,
		perms: map[string]*hostPendingPermission{}, clients: map[string]bool{}, lastUsed: now, mcp: pendingMCP}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return nil, errShuttingDown
	}
	if _, taken := d.sessions[s.id]; taken && hostID {
		return nil, invalidSessionID("create session: session id %q is already in use; omit sessionId or pick another", s.id)
	}
	if _, taken := d.sessions[s.id]; taken || ch.ended() {
		return nil, childUnavailable("create session: the ACP child returned an unusable session id %q", s.id)
	}
	d.sessions[s.id] = s
	d.adoptMCP(s.id)
	d.obs.sessionCreated()
	d.obs.logger().Info("session created", "sessionId", s.id, "workspace", ws)
	return s, nil
}

func (d *daemon) enqueue(s *hostSession, blocks []json.RawMessage, clientID string) (*promptJob, hostFailure) {
	// Not derived from runCtx: at shutdown the active prompt must still be
	// seen as running until cancelActive tells the child to stop.
	ctx, cancel := context.WithCancel(context.Background())
	job := &promptJob{id: randomHex(randomIDBytes), blocks: blocks, ctx: ctx, stop: cancel, clientID: clientID}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case d.closing:
		cancel()
		return nil, errShuttingDown
	case s.dead:
		cancel()
		return nil, sessionDied(s.id)
	case s.ended:
		cancel()
		return nil, sessionNotFound(s.id)
	case len(s.queue) >= d.maxPending:
		cancel()
		d.obs.limitHit(codeQueueFull, "sessionId", s.id, "pending", len(s.queue))
		// Qwen Code's keys and Retry-After (DESIGN.md §7).
		return nil, &hostErrorKeys{hostError: &hostError{http.StatusServiceUnavailable, codeQueueFull,
			fmt.Sprintf("queue prompt: session %q already has %d pending prompts (--max-pending-prompts-per-session)", s.id, len(s.queue))},
			keys:       []hostKey{{"sessionId", s.id}, {"limit", d.maxPending}, {"pendingCount", len(s.queue)}},
			retryAfter: sessionLimitRetryAfter}
	}
	job.lastEventID = s.events.lastID()
	s.queue = append(s.queue, job)
	if !s.running {
		s.running = true
		d.wg.Add(1)
		go s.run()
	}
	return job, nil
}

// run sends the queued prompts to the child one at a time, in FIFO order.
func (s *hostSession) run() {
	defer s.d.wg.Done()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.ended {
			s.running = false
			s.mu.Unlock()
			return
		}
		job := s.queue[0]
		s.queue = s.queue[1:]
		s.active = job
		job.started = time.Now()
		// A prompt cancelled while queued is never sent to the child.
		skipped := job.cancelled
		s.mu.Unlock()

		var stop string
		var err error
		if skipped {
			stop = stopCancelled
		} else {
			s.echoPrompt(job)
			stopDeadline := s.startDeadline(job)
			s.d.slots.begin()
			stop, err = s.sendPrompt(job)
			s.d.slots.end()
			stopDeadline()
		}

		s.mu.Lock()
		s.active = nil
		s.lastUsed = time.Now()
		job.cancel()
		cancelled := job.cancelled
		s.mu.Unlock()
		switch {
		case err != nil:
			s.d.obs.promptEnded(promptResultError)
			s.events.publish(eventTurnError, job.id, turnError{SessionID: s.id, PromptID: job.id, Message: err.Error()})
		case cancelled:
			// A cancelled turn ends "cancelled" whatever the child
			// answered, as Qwen Code's does (DESIGN.md §7).
			s.d.obs.promptEnded(stopCancelled)
			s.events.publish(eventTurnComplete, job.id, turnComplete{SessionID: s.id, PromptID: job.id, StopReason: stopCancelled, PromptCancelled: &promptCancelledInfo{
				CancelledAt: job.cancelledAt.UnixMilli(),
				ElapsedMs:   max(job.cancelledAt.Sub(job.started), 0).Milliseconds(),
			}})
		default:
			s.d.obs.promptEnded(stop)
			s.events.publish(eventTurnComplete, job.id, turnComplete{SessionID: s.id, PromptID: job.id, StopReason: stop})
		}
	}
}

func (s *hostSession) sendPrompt(job *promptJob) (string, error) {
	// A cancel that came before the prompt is written ends the turn
	// without it; one that comes while it is written is sent right after
	// it, so the child never sees session/cancel ahead of the prompt it
	// cancels and the turn ends promptly (DESIGN.md §7).
	s.mu.Lock()
	early := job.cancelled
	s.mu.Unlock()
	if early {
		return stopCancelled, nil
	}
	params, err := appendPromptParams(nil, s.id, job)
	if err != nil {
		return "", fmt.Errorf("prompt: %w", err)
	}
	raw, err := s.ch.conn.callSent(s.d.runCtx, "session/prompt", rpcCompact(params), func() { s.promptSent(job) }, func() { s.promptAnswered(job) })
	if err != nil {
		var rerr *rpcError
		if errors.As(err, &rerr) {
			return "", fmt.Errorf("prompt: the ACP child failed it: %q", rerr.Message)
		}
		return "", fmt.Errorf("prompt: the ACP child did not answer: %w", err)
	}
	var res struct {
		StopReason string          `json:"stopReason"`
		Usage      json.RawMessage `json:"usage"`
		Meta       json.RawMessage `json:"_meta"`
	}
	if err := decodeStrict(raw, &res); err != nil || res.StopReason == "" {
		return "", fmt.Errorf("prompt: the ACP child answered with an invalid result %q", truncateForError(raw))
	}
	return res.StopReason, nil
}

// appendPromptParams appends the params of job's session/prompt to sessionID
// as the wire's encoder writes the object of "_meta", "prompt" and
// "sessionId" (members in key order, no HTML escaping). The caller's _meta
// is never forwarded: the daemon rebinds the identity it generated.
func appendPromptParams(b []byte, sessionID string, job *promptJob) ([]byte, error) {
	b = append(b, `{"_meta":{"`+metaInvocation+`":{"version":`...)
	b = strconv.AppendInt(b, invocationVersion, 10)
	b = appendJSONString(append(b, `,"sessionId":`...), sessionID, false)
	b = appendJSONString(append(b, `,"promptId":`...), job.id, false)
	b = append(b, `}},"prompt":`...)
	if job.blocks == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, block := range job.blocks {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if block == nil {
				b = append(b, "null"...)
			} else if b, err = appendCompactJSON(b, block); err != nil {
				return nil, fmt.Errorf("prompt block %d: %w", i, err)
			}
		}
		b = append(b, ']')
	}
	b = appendJSONString(append(b, `,"sessionId":`...), sessionID, false)
	return append(b, '}'), nil
}

// promptSent records that job's session/prompt is written and, if job was
// cancelled meanwhile, tells the child now.
func (s *hostSession) promptSent(job *promptJob) {
	s.mu.Lock()
	job.sent = true
	tell := job.cancelled && !s.dead
	s.mu.Unlock()
	if tell {
		s.ch.conn.notify("session/cancel", map[string]string{"sessionId": s.id})
	}
}

// echoPrompt publishes each text block of job as a user_message_chunk, the
// first frames of its turn, as Qwen Code's daemon echoes them (DESIGN.md §7).
func (s *hostSession) echoPrompt(job *promptJob) {
	for _, raw := range job.blocks {
		var b struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(raw, &b) != nil || b.Type != "text" || b.Text == nil {
			continue
		}
		update, err := json.Marshal(userMessageChunk{
			SessionUpdate: "user_message_chunk",
			Content:       textContent{Type: "text", Text: *b.Text},
			Meta:          echoMeta{ServerTimestamp: time.Now().UnixMilli(), Source: "bridge-echo"},
		})
		if err != nil {
			continue
		}
		s.events.publishUpdate(job.id, sessionUpdateEvent{SessionID: s.id, Update: update})
	}
}

// Reasons of a prompt_cancelled event that the host did not ask for.
const (
	cancelReasonDeadline = "prompt_deadline"
	cancelReasonShutdown = "daemon_shutdown"
)

// cancelActive cancels the running prompt: a prepare for it is denied from
// now on, a pending permission request is answered cancelled, and the
// child is told to stop (it answers the prompt with stopReason cancelled).
// With no running prompt it cancels the next queued one, which the runner
// has not taken yet. reason is prompt_cancelled's, "" for the host's.
func (s *hostSession) cancelActive(reason string) { s.cancelPrompt(nil, reason) }

// cancelPrompt cancels the running prompt as cancelActive does, if it is
// only (any, when only is nil); it reports whether it cancelled one.
// prompt_cancelled is published before the permission_resolved and the
// turn_complete the cancel causes (DESIGN.md §7).
func (s *hostSession) cancelPrompt(only *promptJob, reason string) bool {
	s.mu.Lock()
	job := s.active
	if job == nil && only == nil && len(s.queue) > 0 {
		job = s.queue[0]
	}
	if job == nil || job.ctx.Err() != nil || job.cancelled || s.ended || (only != nil && job != only) {
		s.mu.Unlock()
		return false
	}
	job.cancelled = true
	job.cancelledAt = time.Now()
	s.events.publishFrom(eventPromptCancelled, job.id, job.clientID, promptCancelledEvent{SessionID: s.id, Reason: reason})
	if job != s.active {
		// Queued: the runner ends it without sending it to the child.
		s.mu.Unlock()
		return true
	}
	job.cancel()
	s.cancelPermsLocked()
	// Unsent, the prompt is not running in the child yet: promptSent tells
	// the child once it is.
	sent := job.sent
	s.mu.Unlock()
	if sent {
		s.ch.conn.notify("session/cancel", map[string]string{"sessionId": s.id})
	}
	return true
}

// end finishes a session for good: closed by the host or died with its
// child. deleted says the host deleted it: the child's session/close
// carries metaSessionDeleted, for its SessionDelete hooks.
func (s *hostSession) end(typ, message string, deleted bool) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.dead = typ == eventSessionDied
	active := s.active
	if active != nil && active.ctx.Err() == nil {
		active.cancelled = true
	}
	activeSent := active != nil && active.sent
	for _, job := range s.queue {
		job.cancel()
	}
	s.queue = nil
	s.cancelPermsLocked()
	s.mu.Unlock()
	s.closeMCP()
	if active != nil {
		active.cancel()
		if !s.dead && activeSent {
			s.ch.conn.notify("session/cancel", map[string]string{"sessionId": s.id})
		}
	}
	if !s.dead {
		// The child ends the session's background processes and MCP
		// servers; the session is gone for the host whatever it answers.
		s.d.wg.Add(1)
		go func() {
			defer s.d.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), childStopGrace)
			defer cancel()
			// Its SessionEnd and SessionDelete hooks fire during the close.
			defer s.d.closingHooks(s)()
			params := map[string]any{"sessionId": s.id}
			if deleted {
				params["_meta"] = map[string]bool{metaSessionDeleted: true}
			}
			if _, err := s.ch.conn.call(ctx, methodSessionClose, params); err != nil && !s.ch.ended() {
				s.d.obs.logger().Warn("session/close on the ACP child failed", "session", s.id, "err", err)
			}
		}()
	}
	data := map[string]string{"sessionId": s.id}
	if message != "" {
		data["message"] = message
	}
	s.events.publish(typ, "", data)
	s.events.close()
	s.d.mu.Lock()
	live := s.d.liveSessionsLocked()
	s.d.mu.Unlock()
	sessionMemory.closed(live)
}

func (s *hostSession) activePromptID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		return ""
	}
	return s.active.id
}

type hostPermissionParams struct {
	SessionID string                 `json:"sessionId"`
	ToolCall  json.RawMessage        `json:"toolCall"`
	Options   []hostPermissionOption `json:"options"`
	Meta      json.RawMessage        `json:"_meta"`
}

type hostPermissionOption struct {
	OptionID string          `json:"optionId"`
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Meta     json.RawMessage `json:"_meta,omitempty"`
}

// askPermission relays one session/request_permission to the host and waits
// for its vote; anything but a vote is the cancelled outcome.
func (s *hostSession) askPermission(ctx context.Context, p hostPermissionParams) hostVoteOutcome {
	requestID := randomHex(randomIDBytes)
	pend := &hostPendingPermission{resolved: make(chan permissionVote, 1), options: p.Options, toolCall: p.ToolCall}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return voteCancelled
	}
	promptID, sender := "", ""
	if s.active != nil {
		promptID, sender = s.active.id, s.active.clientID
	}
	pend.promptID = promptID
	s.perms[requestID] = pend
	s.mu.Unlock()

	s.events.publishFrom(eventPermissionRequest, promptID, sender, permissionRequestEvent{RequestID: requestID, SessionID: s.id, ToolCall: p.ToolCall, Options: p.Options})
	var expired <-chan time.Time
	if timeout := s.d.limits.PermissionTimeout; timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var out permissionVote
	select {
	case out = <-pend.resolved:
	case <-ctx.Done():
		s.mu.Lock()
		if s.perms[requestID] != nil {
			s.resolveLocked(requestID, pend, permissionVote{out: voteCancelled})
		}
		s.mu.Unlock()
		out = <-pend.resolved // this cancel, or a vote that won the race
	case <-expired:
		s.mu.Lock()
		_, unanswered := s.perms[requestID]
		if unanswered {
			s.resolveLocked(requestID, pend, permissionVote{out: voteCancelled})
		}
		s.mu.Unlock()
		if unanswered {
			s.d.obs.limitHit(limitPermissionTimeout, "sessionId", s.id, "requestId", requestID, "timeout", s.d.limits.PermissionTimeout)
		}
		// This expiry, or a vote or a cancel that won the race: buffered.
		out = <-pend.resolved
	}
	// The child reads a cancelled answer without a session/cancel before
	// it as the user's reject, and ends the turn: the prompt's cancel is
	// told first (again; a second session/cancel changes nothing; DESIGN.md §7).
	s.mu.Lock()
	tell := out.out == voteCancelled && s.active != nil && s.active.cancelled && s.active.sent && !s.dead
	s.mu.Unlock()
	if tell {
		s.ch.conn.notify("session/cancel", map[string]string{"sessionId": s.id})
	}
	return out.out
}

// hostFailure is an error reply to a host request.
type hostFailure interface{ write(http.ResponseWriter) }

// invalidOptionError is Qwen Code's 400 for a vote naming an option the
// agent did not offer, with its text and body keys (DESIGN.md §7, §11).
type invalidOptionError struct{ requestID, optionID string }

func (e *invalidOptionError) write(w http.ResponseWriter) {
	writeHostJSON(w, http.StatusBadRequest, struct {
		Error     string `json:"error"`
		Code      string `json:"code"`
		RequestID string `json:"requestId"`
		OptionID  string `json:"optionId"`
	}{fmt.Sprintf("Permission %s: optionId %q is not in the set of options the agent offered.", e.requestID, e.optionID),
		codeInvalidOptionID, e.requestID, e.optionID})
}

// vote resolves a pending permission request with the host's outcome,
// voter's ("" for none). A legacy option id (legacyOptionKinds) stands for
// the offered option of its kind, and the child is sent the offered id.
func (s *hostSession) vote(requestID string, out hostVoteOutcome, voter string) hostFailure {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.perms[requestID]
	if p == nil {
		if slices.Contains(s.resolvedPerms, requestID) && !s.ended {
			s.events.publishFrom(eventPermissionAlreadyResolved, "", voter, permissionAlreadyResolvedEvent{RequestID: requestID, SessionID: s.id})
		}
		// Qwen Code's text and keys (DESIGN.md §11).
		return &hostErrorKeys{hostError: &hostError{http.StatusNotFound, codePermissionUnknown, "No pending permission request for session"},
			keys: []hostKey{{"sessionId", s.id}, {"requestId", requestID}}}
	}
	switch {
	case out == voteCancelled:
	case out.Outcome == outcomeSelected && out.OptionID != "":
		chosen := chosenOption(p.options, out.OptionID, func(o hostPermissionOption) (string, string) { return o.OptionID, o.Kind })
		if chosen == nil {
			return &invalidOptionError{requestID, out.OptionID}
		}
		out.OptionID = chosen.OptionID
	default:
		return &hostError{http.StatusBadRequest, codeBadRequest, voteInvalidText}
	}
	s.resolveLocked(requestID, p, permissionVote{out: out, voter: voter})
	return nil
}

// liveSessionsLocked counts the sessions not yet ended; d.mu is held.
func (d *daemon) liveSessionsLocked() int {
	n := 0
	for _, s := range d.sessions {
		if !s.isEnded() {
			n++
		}
	}
	return n
}

func (s *hostSession) isEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// touch records a host request on the session.
func (s *hostSession) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// idleFor is how long the session has had no prompt and no host request:
// zero while a prompt runs or waits.
func (s *hostSession) idleFor(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil || len(s.queue) > 0 {
		return 0
	}
	return now.Sub(s.lastUsed)
}

// reapIdleSessions closes idle sessions, and ends idle children, until ctx
// is done. The daemon's WaitGroup owns it.
func (d *daemon) reapIdleSessions(ctx context.Context) {
	defer d.wg.Done()
	t := time.NewTicker(min(d.limits.SessionIdleTimeout/idleChecksPerTimeout, maxIdleCheckInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d.reapIdle(now)
			d.reapIdleChildren(now)
		}
	}
}

// reapIdle closes every session idle for the timeout, the ones whose child
// died included: they would otherwise stay registered for good.
func (d *daemon) reapIdle(now time.Time) {
	d.mu.Lock()
	var idle []*hostSession
	for id, s := range d.sessions {
		if s.idleFor(now) >= d.limits.SessionIdleTimeout {
			delete(d.sessions, id)
			idle = append(idle, s)
		}
	}
	d.mu.Unlock()
	for _, s := range idle {
		d.obs.limitHit(limitSessionIdle, "sessionId", s.id, "idleTimeout", d.limits.SessionIdleTimeout)
		s.end(eventSessionClosed, fmt.Sprintf("session closed after %v without a prompt or a host request", d.limits.SessionIdleTimeout), false)
	}
}

// startDeadline cancels job at the prompt deadline, as a host's cancel
// would. The returned stop waits for a deadline that already fired, so
// no timer goroutine outlives the prompt.
func (s *hostSession) startDeadline(job *promptJob) (stop func()) {
	deadline := s.d.limits.PromptDeadline
	if deadline <= 0 {
		return func() {}
	}
	fired := make(chan struct{})
	t := time.AfterFunc(deadline, func() {
		defer close(fired)
		if s.cancelPrompt(job, cancelReasonDeadline) {
			s.d.obs.limitHit(limitPromptDeadline, "sessionId", s.id, "promptId", job.id, "deadline", deadline)
		}
	})
	return func() {
		if !t.Stop() {
			<-fired
		}
	}
}
