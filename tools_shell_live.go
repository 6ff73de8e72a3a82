// tools_shell_live.go owns the live view of a running foreground shell
// command: what it printed so far, handed to the call's observer while it
// runs, bounded in bytes and in hand-overs per second. The final result is
// execShell's alone; the live view never changes it.
package main

import (
	"sync"
	"time"
	"unicode/utf8"
)

// liveOutputObserver is an observer that shows a running command's output.
// toolOutput is called from one goroutine at a time, only between the
// call's toolRunning and the executor's return: chunk is what the command
// printed since the last call (its last liveOutputBytes when it printed
// more, skipped counting the bytes left out), tail is the last
// liveOutputBytes of everything it printed.
type liveOutputObserver interface {
	toolOutput(chunk, tail string, skipped int64)
}

const (
	// liveOutputBytes bounds both texts of one live update: an editor
	// shows the end of a running command's output in a card, a host
	// appends the chunks; a build that prints megabytes would otherwise
	// send each of them again with every update.
	liveOutputBytes = 16 << 10
	// liveOutputInterval is the least time between two live updates of a
	// call, at most four a second: a person reading the output sees no
	// difference, and a command printing in a tight loop costs the
	// channel, serve's event ring and every host a bounded rate.
	liveOutputInterval = 250 * time.Millisecond
)

// liveOutput is the io.Writer beside the result's buffer that feeds the
// observer. Write never blocks on the observer: a goroutine hands the
// output over at most once per liveOutputInterval.
type liveOutput struct {
	obs liveOutputObserver

	mu      sync.Mutex
	tail    []byte // the last bytes printed, at most liveOutputBytes
	pending []byte // printed since the last hand-over, at most liveOutputBytes
	skipped int64  // bytes dropped from pending

	wake chan struct{} // one buffered signal: output is pending
	stop chan struct{}
	done chan struct{}
}

// startLiveOutput starts the live view of a command for env's observer;
// nil when the observer shows none.
func startLiveOutput(env *toolEnv) *liveOutput {
	obs, ok := env.Observer.(liveOutputObserver)
	if !ok {
		return nil
	}
	l := &liveOutput{obs: obs, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *liveOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.tail = keepLast(append(l.tail, p...), liveOutputBytes)
	l.pending = append(l.pending, p...)
	n := len(l.pending)
	l.pending = keepLast(l.pending, liveOutputBytes)
	l.skipped += int64(n - len(l.pending))
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// keepLast is the last max bytes of b, in b's array: at most max, starting
// at the first rune boundary.
func keepLast(b []byte, max int) []byte {
	if len(b) <= max {
		return b
	}
	cut := len(b) - max
	for i := 0; i < utf8.UTFMax-1 && cut < len(b) && !utf8.RuneStart(b[cut]); i++ {
		cut++
	}
	return append(b[:0], b[cut:]...)
}

// run hands the pending output over as it comes, never two hand-overs
// within liveOutputInterval, until close.
func (l *liveOutput) run() {
	defer close(l.done)
	pause := time.NewTimer(0)
	<-pause.C
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			return
		}
		l.handOver()
		pause.Reset(liveOutputInterval)
		select {
		case <-pause.C:
		case <-l.stop:
			pause.Stop()
			return
		}
	}
}

// handOver gives the observer the pending output up to its last whole rune
// (the rest waits for its next bytes) and the tail to the same point.
func (l *liveOutput) handOver() {
	l.mu.Lock()
	end := wholeRunes(l.pending)
	if end == 0 {
		l.mu.Unlock()
		return
	}
	held := len(l.pending) - end
	chunk, tail, skipped := string(l.pending[:end]), string(l.tail[:len(l.tail)-min(held, len(l.tail))]), l.skipped
	l.pending = append(l.pending[:0], l.pending[end:]...)
	l.skipped = 0
	l.mu.Unlock()
	l.obs.toolOutput(chunk, tail, skipped)
}

// wholeRunes is the length of b without a rune its last bytes only begin.
func wholeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// close ends the live view and returns once no hand-over runs: the call's
// final update comes after every live one.
func (l *liveOutput) close() {
	close(l.stop)
	<-l.done
}
