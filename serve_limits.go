// serve_limits.go owns the limits of "acpguard serve" ("a daemon on a
// shared host must bound what any one caller can make it hold"): their
// codes, and the ones that end something on a clock rather than refuse a
// request: the idle-session reaper and the prompt deadline.
package main

import (
	"context"
	"fmt"
	"time"
)

// Codes of the limits a host request can hit.
const (
	// "--max-sessions 32 live sessions (503, code session_limit_exceeded, Retry-After)."
	codeSessionLimit = "session_limit_exceeded"
	// "prompt arrays at most 256 blocks"
	codePromptTooLarge = "prompt_too_large"
	// "--max-subscribers-per-session 8 SSE streams"
	codeSubscriberLimit = "subscriber_limit_exceeded"
	// "a child that does not answer is killed and the session creation fails 503"
	codeInitializeTimeout = "initialize_timeout"
)

// Names under which limits that end something, rather than refuse a
// request, are logged and counted.
const (
	// "a slow one is dropped ..., the others and the child are unaffected"
	limitSubscriberDropped = "subscriber_dropped"
	// "a prompt still running at its deadline is cancelled as if the host had cancelled it"
	limitPromptDeadline = "prompt_deadline_exceeded"
	// "when it expires the permission is answered cancelled, so the call does not run"
	limitPermissionTimeout = "permission_timeout"
	// "Idle sessions reaped after --session-idle-timeout-ms 1800000 with session_closed."
	limitSessionIdle = "session_idle_timeout"
)

const (
	// "Host request bodies at most 1 MiB (413); prompt arrays at most 256 blocks."
	maxPromptBlocks = 256
	// A full daemon frees a session when a host deletes one or one idles
	// out; a host asked to come back in seconds does not hammer it.
	sessionLimitRetryAfter = "5"
	// The reaper looks for idle sessions a few times per idle timeout, so a
	// session outlives its timeout by a fraction of it at most.
	idleChecksPerTimeout = 4
	maxIdleCheckInterval = time.Minute
)

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

// reapIdleSessions closes idle sessions until ctx is done. The daemon's
// WaitGroup owns it.
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
		s.end(eventSessionClosed, fmt.Sprintf("Session closed after %v without a prompt or a host request", d.limits.SessionIdleTimeout))
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
		if s.cancelPrompt(job) {
			s.d.obs.limitHit(limitPromptDeadline, "sessionId", s.id, "promptId", job.id, "deadline", deadline)
		}
	})
	return func() {
		if !t.Stop() {
			<-fired
		}
	}
}
