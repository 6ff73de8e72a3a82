// slots.go owns how acpguard's processes use the Go runtime: how many
// scheduler slots serve and the reference provider use (one while little
// is in progress at once, serve's prompts, the provider's requests, the
// runtime's default above that), and when acp and serve give the memory of
// closed sessions back. The measurements behind both are in
// docs/performance.md.
package main

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// The work of serve for a prompt, and of the provider for a request, is
// short steps between waits on another process. On one slot the goroutine
// that reads an answer runs the step it wakes on its own thread; with more,
// waking it often wakes a second thread first. Each widens as soon as more
// is in progress than its bound, and narrows again only when no more has
// been for slotsNarrowAfter. The bounds are measured on the 2-core VM with
// the cost run (docs/performance.md).
const (
	// slotsServeMaxPrompts is the most prompts serve runs at once on one
	// slot. One session: serve's CPU per guarded call about 20 % lower on
	// one slot, with more calls per second; 32 sessions on one slot: 3-12 %
	// fewer calls per second, as the steps of many prompts queue behind
	// each other; 4 sessions: no clear winner.
	slotsServeMaxPrompts = 2
	// slotsProviderMaxRequests is the most requests the provider handles
	// at once on one slot. A request is a few tens of microseconds of work
	// once its body is in: one session, the provider's CPU per decision
	// 28-31 % lower on one slot; 32 sessions, 10-13 % lower and more calls
	// per second with this bound than with 2 or 4.
	slotsProviderMaxRequests = 8
	// slotsNarrowAfter is how long what is in progress must stay at or
	// under the bound before the runtime goes back to one slot. A change
	// stops the world for a moment; the delay keeps a count that hovers at
	// the bound from changing it at every turn.
	slotsNarrowAfter = time.Second
)

// schedSlots follows what is in progress and sets the runtime's slots. The
// zero value and nil do nothing: an operator's GOMAXPROCS, and a server in
// a test's process, keep the runtime as it is.
type schedSlots struct {
	maxBusy int // at most this many in progress run on one slot
	mu      sync.Mutex
	running int
	wide    bool
	timer   slotsTimer // the pending narrowing, nil when none
	// set applies a width; after arms a narrowing. Both are the runtime's
	// and the clock's outside tests, which record them.
	set   func(wide bool)
	after func(d time.Duration, f func()) slotsTimer
}

// slotsTimer is the pending narrowing: a *time.Timer outside tests.
type slotsTimer interface{ Stop() bool }

// newSchedSlots puts the runtime on one slot, and on the runtime's own
// width while more than maxBusy are in progress.
func newSchedSlots(log *slog.Logger, maxBusy int) *schedSlots {
	s := &schedSlots{
		maxBusy: maxBusy,
		set: func(wide bool) {
			if wide {
				runtime.SetDefaultGOMAXPROCS()
			} else {
				runtime.GOMAXPROCS(1)
			}
			log.Debug("scheduler slots", "gomaxprocs", runtime.GOMAXPROCS(0))
		},
		after: func(d time.Duration, f func()) slotsTimer { return time.AfterFunc(d, f) },
	}
	s.set(false)
	return s
}

// begin counts a prompt or request that starts; it widens at once when the
// count passes the bound.
func (s *schedSlots) begin() {
	if s == nil || s.set == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running++
	if s.running <= s.maxBusy {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if !s.wide {
		s.wide = true
		s.set(true)
	}
}

// end counts a prompt or request that ended; back at or under the bound, a
// wide runtime narrows after slotsNarrowAfter unless the count passes the
// bound again first.
func (s *schedSlots) end() {
	if s == nil || s.set == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if !s.wide || s.running > s.maxBusy || s.timer != nil {
		return
	}
	var t slotsTimer
	t = s.after(slotsNarrowAfter, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		// A timer stopped too late still runs: only the armed one acts.
		if s.timer != t {
			return
		}
		s.timer = nil
		if s.wide && s.running <= s.maxBusy {
			s.wide = false
			s.set(false)
		}
	})
	s.timer = t
}

// Returning the memory of closed sessions: the runtime keeps the heap it
// grew for sessions that are gone, and an idle process collects too seldom
// to give it back soon. A return is a full collection and a scavenge, a few
// milliseconds of CPU at this process's heap size, so it is bounded in
// frequency.
const (
	// memoryReturnCloses: closes after which memory is returned even while
	// other sessions live (the last one's close always returns it).
	memoryReturnCloses = 32
	// memoryReturnDelay lets a burst of closes, and the release of what
	// they held, finish before the one return that covers them.
	memoryReturnDelay = 100 * time.Millisecond
	// memoryReturnInterval is the least time between two returns.
	memoryReturnInterval = time.Second
)

// memoryReturn gives the heap of closed sessions back to the system, once
// the process's live sessions drop to none or after memoryReturnCloses
// closes, at most once per memoryReturnInterval. Its timer holds no
// goroutine while it waits.
type memoryReturn struct {
	mu      sync.Mutex
	pending bool      // a return is scheduled
	closes  int       // sessions closed since the last return
	last    time.Time // the start of the last return
}

// sessionMemory is the process's: acp's sessions, or serve's.
var sessionMemory memoryReturn

// closed counts a closed session; live is how many remain open.
func (m *memoryReturn) closed(live int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closes++
	if m.pending || live > 0 && m.closes < memoryReturnCloses {
		return
	}
	m.pending = true
	time.AfterFunc(max(memoryReturnDelay, memoryReturnInterval-time.Since(m.last)), func() {
		m.mu.Lock()
		m.pending, m.closes, m.last = false, 0, time.Now()
		m.mu.Unlock()
		debug.FreeOSMemory()
	})
}
