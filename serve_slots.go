// serve_slots.go owns how many scheduler slots serve's Go runtime uses: one
// while few prompts run at once, the runtime's default above that. The
// measurements behind the rule are in docs/performance.md.
package main

import (
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// serve's work for a prompt is short steps between waits on its child, the
// provider and the host. On one slot the goroutine that reads an answer
// runs the step it wakes on its own thread; with more, waking it often
// wakes a second thread first. Measured on the 2-core VM with the cost run
// (docs/performance.md): one session, serve's CPU per guarded call 25 %
// lower on one slot, and more calls per second; 32 sessions, 3-12 % fewer
// calls per second on one slot, as the steps of many prompts queue behind
// each other. So serve widens as soon as more prompts run than
// slotsNarrowMaxPrompts, and narrows again only when no more have run for
// slotsNarrowAfter.
const (
	// slotsNarrowMaxPrompts is the most prompts running at once that serve
	// runs on one scheduler slot.
	slotsNarrowMaxPrompts = 2
	// slotsNarrowAfter is how long the running prompts must stay at or
	// under slotsNarrowMaxPrompts before serve goes back to one slot. A
	// change stops the world for a moment; the delay keeps a count that
	// hovers at the bound from changing it at every turn.
	slotsNarrowAfter = time.Second
)

// schedSlots follows the prompts serve runs and sets the runtime's slots.
// The zero value and nil do nothing: an operator's GOMAXPROCS, and a daemon
// in a test's process, keep the runtime as it is.
type schedSlots struct {
	mu      sync.Mutex
	running int
	wide    bool
	timer   slotsTimer // the pending narrowing, nil when none
	// set applies a width; after arms a narrowing. Both are the runtime's
	// and the clock's in serve, recorded in tests.
	set   func(wide bool)
	after func(d time.Duration, f func()) slotsTimer
}

// slotsTimer is the pending narrowing: *time.Timer in serve.
type slotsTimer interface{ Stop() bool }

// newSchedSlots starts serve on one slot, under the runtime's own width
// once more than slotsNarrowMaxPrompts prompts run.
func newSchedSlots(log *slog.Logger) *schedSlots {
	s := &schedSlots{
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

// promptStarted counts a prompt that serve sends to its child; it widens
// at once when the count passes slotsNarrowMaxPrompts.
func (s *schedSlots) promptStarted() {
	if s == nil || s.set == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running++
	if s.running <= slotsNarrowMaxPrompts {
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

// promptEnded counts a prompt that ended; back at or under the bound, a
// wide runtime narrows after slotsNarrowAfter unless the count passes the
// bound again first.
func (s *schedSlots) promptEnded() {
	if s == nil || s.set == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if !s.wide || s.running > slotsNarrowMaxPrompts || s.timer != nil {
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
		if s.wide && s.running <= slotsNarrowMaxPrompts {
			s.wide = false
			s.set(false)
		}
	})
	s.timer = t
}
