// serve_children.go owns the private acp children of serve: a bounded set of
// them, each on its channel (channel.go), sessions of any workspace placed on
// them, reading them, and ending them and what they left.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// acpChannel is one private ACP child and the JSON-RPC connection to it.
type acpChannel struct {
	d      *daemon
	cmd    *exec.Cmd
	conn   *rpcConn
	sock   *channelConn       // serve's end of the private channel (channel.go)
	cancel context.CancelFunc // ends conn.serve
	done   chan struct{}      // closed once the child is reaped
	// tempDir holds the temp directories of the child's sessions; removed
	// once the child is reaped.
	tempDir string
	// stopping is set once the daemon ends the child: an exit before
	// that is a death.
	stopping atomic.Bool
	// load counts the sessions being created on the child (channelFor,
	// placed); idleSince is when the reaper first saw it carry no session,
	// zero while it carries one. d.mu guards both.
	load      int
	idleSince time.Time
	// told is what the child knows of the variables serve hides: those
	// hidden when its environment was made, then those hideLearned sent
	// (serve_secrets.go). d.mu guards it.
	told []string
	// telling serializes tellHidden on this channel, sends included.
	telling sync.Mutex
}

func (ch *acpChannel) ended() bool {
	select {
	case <-ch.done:
		return true
	default:
		return false
	}
}

// channelFor places a new session on a child (DESIGN.md §2): the child
// with the fewest sessions (live ones and ones being created on it), unless
// it already carries one and fewer than --max-children children run or are
// starting, in which case a new child is started, so that load spreads over
// processes. A session of any workspace may go to any child: its cwd, and
// all that follows from it, is the session's. Concurrent creates never
// start more than --max-children children: a child being started counts.
// The caller holds the place it was given until it calls placed.
func (d *daemon) channelFor(ctx context.Context) (*acpChannel, *hostError) {
	d.mu.Lock()
	for {
		if d.closing {
			d.mu.Unlock()
			return nil, errShuttingDown
		}
		best, load, running := d.leastLoadedLocked()
		if best != nil && (load == 0 || running+d.starting >= d.limits.MaxChildren) {
			best.load++
			best.idleSince = time.Time{}
			d.mu.Unlock()
			return best, nil
		}
		if running+d.starting < d.limits.MaxChildren {
			break
		}
		// Every slot is a child still starting: wait for one to be ready
		// or to fail.
		changed := d.poolChanged
		d.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, childUnavailable("create session: waiting for an ACP child to start: %v", ctx.Err())
		}
		d.mu.Lock()
	}
	d.starting++
	d.mu.Unlock()
	ch, herr := d.startChannel(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.starting--
	d.poolChangedLocked()
	if herr != nil {
		return nil, herr
	}
	if ch.ended() {
		return nil, childUnavailable("start ACP child: it exited right after initialize")
	}
	d.pool = append(d.pool, ch)
	ch.load++
	return ch, nil
}

// placed gives back the place channelFor gave a session being created: the
// session is now live on ch, or its creation failed.
func (d *daemon) placed(ch *acpChannel) {
	d.mu.Lock()
	ch.load--
	d.mu.Unlock()
}

// leastLoadedLocked returns the ready child with the fewest sessions, that
// count, and how many ready children are not known to have ended; d.mu is
// held.
func (d *daemon) leastLoadedLocked() (best *acpChannel, load, running int) {
	live := make(map[*acpChannel]int, len(d.pool))
	for _, s := range d.sessions {
		if !s.isEnded() {
			live[s.ch]++
		}
	}
	for _, ch := range d.pool {
		if ch.ended() {
			continue
		}
		running++
		if n := live[ch] + ch.load; best == nil || n < load {
			best, load = ch, n
		}
	}
	return best, load, running
}

// reapIdleChildren ends every child that has carried no session for the
// idle timeout (--session-idle-timeout-ms), so that its memory goes back;
// the next create starts one again. A child leaves the pool under d.mu
// before it is ended, so no create can be placed on it meanwhile.
func (d *daemon) reapIdleChildren(now time.Time) {
	d.mu.Lock()
	busy := make(map[*acpChannel]bool, len(d.pool))
	for _, s := range d.sessions {
		if !s.isEnded() {
			busy[s.ch] = true
		}
	}
	var idle []*acpChannel
	d.pool = slices.DeleteFunc(d.pool, func(ch *acpChannel) bool {
		switch {
		case busy[ch] || ch.load > 0 || ch.ended():
			ch.idleSince = time.Time{}
			return false
		case ch.idleSince.IsZero():
			ch.idleSince = now
			return false
		case now.Sub(ch.idleSince) < d.limits.SessionIdleTimeout:
			return false
		}
		idle = append(idle, ch)
		return true
	})
	d.mu.Unlock()
	for _, ch := range idle {
		d.obs.logger().Info("ACP child ended: no session", "pid", ch.cmd.Process.Pid, "idleTimeout", d.limits.SessionIdleTimeout)
		ch.stop()
	}
}

// poolChangedLocked wakes the creates waiting for a child to start; d.mu
// is held.
func (d *daemon) poolChangedLocked() {
	close(d.poolChanged)
	d.poolChanged = make(chan struct{})
}

// childLogArgs makes the children log as the daemon does: their stderr is
// the daemon's.
func childLogArgs(logJSON bool, level slog.Level) []string {
	format := "text"
	if logJSON {
		format = "json"
	}
	return []string{"--log-format", format, "--log-level", strings.ToLower(level.String())}
}

// childCommand is "acpguard acp" with the operator's settings, opened slash
// commands and model choice, and the scrubbed environment; in required mode
// that environment also carries the required-v1 marker, and never a secret.
// Nothing else is added: what the child leaves behind is found by its
// session (reaper.go).
func (d *daemon) childCommand(exe string) *exec.Cmd {
	args := append([]string{"acp"}, d.childModelArgs()...)
	// session/load is not part of the host API: a child saves nothing.
	args = append(args, "--"+flagStateDir, stateDirOff)
	if d.settingsFile != "" {
		args = append(args, "--settings", d.settingsFile)
	}
	args = append(args, d.settingsArgs...)
	if d.systemFile != "" {
		args = append(args, "--"+flagSystemPromptFile, d.systemFile)
	}
	for _, name := range d.allowSlash {
		args = append(args, "--allow-slash-command", name)
	}
	if len(d.disabled) > 0 {
		args = append(args, "--disabled-slash-commands", strings.Join(d.disabled, ","))
	}
	args = append(args, d.childLog...)
	args = append(args, d.sandbox.childArgs(d.sandboxFlags)...)
	if !d.guarded {
		// serve warned once about off mode; its children stay quiet.
		args = append(args, "--"+flagGuardMode+"="+guardModeOff)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = d.sys.env.acpChildEnv(d.guarded)
	return cmd
}

// settingsChildArgs are the settings files flags serve passes to every
// child, so that the child reads the files serve read.
func settingsChildArgs(opts serveOptions) []string {
	var args []string
	if opts.NoUserSettings {
		args = append(args, "--"+flagNoUserSettings)
	}
	if opts.TrustWorkspaceSettings {
		args = append(args, "--"+flagTrustWorkspaceSettings)
	}
	return args
}

type initializeResult struct {
	ProtocolVersion   int                        `json:"protocolVersion"`
	AgentCapabilities map[string]json.RawMessage `json:"agentCapabilities"`
	AuthMethods       json.RawMessage            `json:"authMethods"`
	AgentInfo         json.RawMessage            `json:"agentInfo"`
	Meta              json.RawMessage            `json:"_meta"`
}

// childTempPattern names the directory a child's sessions make their temp
// directories in (mode 0700, under serve's temporary directory or
// --sandbox-temp).
const childTempPattern = "acpguard-child-"

// childDir is where every child starts: no workspace, so that nothing in a
// child can take one workspace's files for another's; "/" exists on every
// host and names no user's files.
const childDir = "/"

// startChannel spawns "acpguard acp" on a private socket pair (channel.go)
// and initializes it. In required mode the child must acknowledge
// required-v1, or it is killed before any session exists on it.
func (d *daemon) startChannel(ctx context.Context) (*acpChannel, *hostError) {
	exe, err := os.Executable()
	if err != nil {
		return nil, childUnavailable("start ACP child: locate the acpguard executable: %v", err)
	}
	told := envOf(d.sys).hiddenNames() // before its environment is made
	cmd := d.childCommand(exe)
	// The child's sessions make their temp directories in one of its own,
	// which run removes once the child is reaped: a child killed with its
	// sessions cannot remove theirs.
	tempDir, err := os.MkdirTemp(d.sandbox.Config.TempParent, childTempPattern)
	if err != nil {
		return nil, childUnavailable("start ACP child: make its temp directory: %v", err)
	}
	cmd.Args = append(cmd.Args, "--"+flagSandboxTemp, tempDir)
	// No workspace: a child serves sessions of every workspace, each in
	// its own cwd (DESIGN.md §2).
	cmd.Dir = childDir
	cmd.Stderr = d.sys.stderr
	// A descendant that kept the child's stderr open cannot hold Wait.
	cmd.WaitDelay = childStopGrace
	ends, err := newChannel()
	if err != nil {
		removeTree(tempDir)
		return nil, childUnavailable("start ACP child: %v", err)
	}
	// The child's ends are its stdin and stdout; serve keeps only its own.
	cmd.Stdin, cmd.Stdout = ends.childStdin, ends.childStdout

	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		ends.closeAll()
		removeTree(tempDir)
		return nil, errShuttingDown
	}
	// In a session of its own, with a parent-death signal (lifeline.go).
	if err := startChild(cmd); err != nil {
		d.mu.Unlock()
		ends.closeAll()
		removeTree(tempDir)
		return nil, childUnavailable("start ACP child: %v", err)
	}
	ends.closeChild()
	sock := ends.conn(cmd.Process.Pid)
	// Not derived from runCtx: at shutdown the child gets its grace period
	// to end its tools before the connection is cut.
	connCtx, cancel := context.WithCancel(context.Background())
	ch := &acpChannel{d: d, cmd: cmd, sock: sock, cancel: cancel, done: make(chan struct{}), tempDir: tempDir, told: told}
	// A model call's request, most of its line, is walked once, by the
	// check that forwards it (serve_model.go).
	ch.conn = newRPCConn(sock, sock, rpcConfig{MaxLine: maxChildLine, OnRequest: ch.onRequest, OnNotify: ch.onNotify, CancelNotice: acpCancelNotice,
		ParamsChecked: []string{methodModelComplete}})
	d.chans[ch] = struct{}{}
	d.wg.Add(1)
	go ch.run(connCtx)
	d.mu.Unlock()
	d.obs.childStarted()
	d.obs.logger().Info("ACP child started", "pid", cmd.Process.Pid)

	initParams := map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false,
			"_meta": map[string]bool{metaBackgroundReports: true}},
		"clientInfo": map[string]string{"name": "acpguard-serve", "version": version},
	}
	cctx, cancelCall := context.WithTimeout(ctx, d.limits.InitializeTimeout)
	defer cancelCall()
	raw, err := ch.conn.call(cctx, "initialize", initParams)
	if err != nil {
		ch.stop()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			d.obs.limitHit(codeInitializeTimeout, "pid", cmd.Process.Pid, "timeout", d.limits.InitializeTimeout)
			return nil, &hostError{http.StatusServiceUnavailable, codeInitializeTimeout,
				fmt.Sprintf("initialize ACP child: no answer within %v; it was killed (--initialize-timeout-ms)", d.limits.InitializeTimeout)}
		}
		return nil, childUnavailable("initialize ACP child: %v", err)
	}
	var res initializeResult
	if err := decodeStrict(raw, &res); err != nil || res.ProtocolVersion != 1 {
		ch.stop()
		return nil, childUnavailable("initialize ACP child: invalid result %q", truncateForError(raw))
	}
	if d.guarded && guardAcknowledgement(res.AgentCapabilities) != privateGuardMarker {
		ch.stop()
		return nil, &hostError{http.StatusServiceUnavailable, codeGuardNotReady,
			fmt.Sprintf("initialize ACP child: no acknowledgement of the external tool guard (want agentCapabilities._meta[%q] = %q); channel rejected", metaGuardReady, privateGuardMarker)}
	}
	return ch, nil
}

// guardAcknowledgement returns the child's required-v1 acknowledgement, or
// "" when it is missing or malformed. caps passed decodeStrict with the
// initialize result, so a plain read of its members is exact.
func guardAcknowledgement(caps map[string]json.RawMessage) string {
	var meta map[string]json.RawMessage
	if json.Unmarshal(caps["_meta"], &meta) != nil {
		return ""
	}
	var ack string
	if json.Unmarshal(meta[metaGuardReady], &ack) != nil {
		return ""
	}
	return ack
}

// run owns the child: it serves the connection until the child's end of it
// closes (or the child exited, or another process wrote to it), then makes
// sure the whole process group is gone and reaps it.
func (ch *acpChannel) run(ctx context.Context) {
	defer ch.d.wg.Done()
	drained := ch.sock.drainAfterExit()
	serveErr := ch.conn.serve(ctx)
	syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
	ch.sock.Close()
	if fw, ok := errors.AsType[*foreignWriterError](serveErr); ok {
		ch.d.obs.logger().Error("another process wrote to an ACP child's private channel: the child was ended", "pid", fw.child, "writer", fw.writer, "err", fw)
	}
	// A child that died without ending its tool, hook and MCP process
	// groups (SIGKILL) leaves them running: end them by its session while
	// the unreaped child still holds its pid (reaper.go).
	waitExited(ch.cmd.Process.Pid)
	if n := endLeftBehind(ch.cmd.Process.Pid); n > 0 {
		ch.d.obs.logger().Warn("ended processes the ACP child left behind", "pid", ch.cmd.Process.Pid, "processes", n)
	}
	err := ch.cmd.Wait()
	<-drained
	forgetChild(ch.cmd.Process.Pid)
	removeTree(ch.tempDir)
	if !ch.stopping.Load() {
		ch.d.obs.childDied()
		ch.d.obs.logger().Warn("ACP child exited", "pid", ch.cmd.Process.Pid, "status", fmt.Sprint(err))
	}
	close(ch.done)
	ch.d.channelEnded(ch)
}

// stop ends the child: EOF (shutdown of serve's writing side) and SIGTERM
// first, so it can end its own tool process groups, then SIGKILL to the
// group after a grace period.
func (ch *acpChannel) stop() {
	ch.stopping.Store(true)
	ch.sock.CloseWrite()
	syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(childStopGrace)
	defer t.Stop()
	select {
	case <-ch.done:
		return
	case <-t.C:
	}
	syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
	ch.cancel()
	<-ch.done
}

// channelEnded marks every session of an ended child as died.
func (d *daemon) channelEnded(ch *acpChannel) {
	d.mu.Lock()
	delete(d.chans, ch)
	if i := slices.Index(d.pool, ch); i >= 0 {
		d.pool = slices.Delete(d.pool, i, i+1)
	}
	var dying []*hostSession
	for _, s := range d.sessions {
		if s.ch == ch {
			dying = append(dying, s)
		}
	}
	d.mu.Unlock()
	for _, s := range dying {
		s.end(eventSessionDied, "ACP child exited", false)
	}
}

// sessionUpdateMembers are the members a session/update's params may have,
// each at most once, spelled exactly; the index of each is its place in the
// members onNotify finds.
var sessionUpdateMembers = [...]string{"sessionId", "update", "_meta"}

func (ch *acpChannel) onNotify(method string, params json.RawMessage) {
	if method == methodSessionBackground {
		var p sessionBackgroundParams
		if decodeStrict(params, &p) == nil {
			if s := ch.session(p.SessionID); s != nil {
				s.noteBackground(p.Seq, p.Running)
			}
		}
		return
	}
	if method != "session/update" {
		return
	}
	// The hottest decoder of the daemon: three updates per tool call. params
	// is a member of a line rpcConn checked by json.Valid's rules; one walk
	// finds its members, builds no map, and refuses what an exact object
	// refuses (a member of another name, spelled otherwise, or given twice).
	var members [len(sessionUpdateMembers)]json.RawMessage
	if named, valid := syntaxMembers(params, sessionUpdateMembers[:], members[:]); named != nil || !valid {
		return
	}
	sessionID, err := wireStringValue(members[0])
	update := members[1]
	if err != nil || len(update) == 0 || string(update) == "null" {
		return
	}
	s := ch.session(sessionID)
	if s == nil {
		return
	}
	ch.d.obs.toolUpdate(update)
	if bytes.HasPrefix(update, []byte(liveOutputUpdatePrefix)) {
		if update = shellOutputUpdate(update); update == nil {
			return
		}
	}
	s.events.publishUpdate(s.activePromptID(), sessionUpdateEvent{SessionID: sessionID, Update: update})
}

func (ch *acpChannel) onRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case methodGuardPrepare:
		return decisionAnswer(ch.d.prepare(ctx, ch, params)), nil
	case methodModelComplete:
		return ch.d.modelComplete(ctx, ch, params)
	case methodMCPList:
		return ch.d.mcpList(ctx, ch, params)
	case methodMCPCall:
		return ch.d.mcpCall(ctx, ch, params)
	case methodHookHTTP:
		return ch.d.hookHTTP(ctx, ch, params)
	case "session/request_permission":
		var p hostPermissionParams
		if err := decodeStrict(params, &p); err != nil {
			return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("invalid session/request_permission params: %v", err)}
		}
		s := ch.session(p.SessionID)
		if s == nil {
			return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("unknown session %q", p.SessionID)}
		}
		return map[string]hostVoteOutcome{"outcome": s.askPermission(ctx, p)}, nil
	}
	return nil, &rpcError{Code: rpcMethodNotFound, Message: fmt.Sprintf("method %q not found", method)}
}
