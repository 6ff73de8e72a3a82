// proc_test.go checks the process-group runner and the bounded buffer.
package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLimitedBuffer(t *testing.T) {
	b := &limitedBuffer{max: 4, full: make(chan struct{})}
	for _, s := range []string{"ab", "cdef", "gh"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want all of it taken", s, n, err)
		}
	}
	select {
	case <-b.full:
	default:
		t.Error("full is not closed after bytes were dropped")
	}
	if got, want := b.String(), "abcd\n[output truncated at 4 bytes; 4 bytes dropped]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func groupCmd(script string) *exec.Cmd {
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	return cmd
}

// A leader that exits takes what it left in its group with it; the output
// is read although a killed descendant held the pipe.
func TestRunGroupEndsWhatTheLeaderLeft(t *testing.T) {
	out := &limitedBuffer{max: 1 << 10}
	cmd := groupCmd("sleep 300 & echo $!")
	timedOut, err := runGroup(context.Background(), cmd, nil, out, nil, time.Hour, nil)
	if err != nil || timedOut || !cmd.ProcessState.Success() {
		t.Fatalf("runGroup = %v, %v, state %v", timedOut, err, cmd.ProcessState)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	waitGone(t, pid)
}

// The timeout, the stop channel and the context each end the whole group.
func TestRunGroupEnds(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	stop := make(chan struct{})
	close(stop)
	for _, tt := range []struct {
		name     string
		ctx      context.Context
		timeout  time.Duration
		stop     chan struct{}
		timedOut bool
	}{
		{"timeout", context.Background(), 50 * time.Millisecond, nil, true},
		{"stop", context.Background(), time.Hour, stop, false},
		{"context", cancelled, time.Hour, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := groupCmd("sleep 300")
			out, errOut := &limitedBuffer{max: 1 << 10}, &limitedBuffer{max: 1 << 10}
			timedOut, err := runGroup(tt.ctx, cmd, nil, out, errOut, tt.timeout, tt.stop)
			if err != nil || timedOut != tt.timedOut {
				t.Fatalf("runGroup = %v, %v; want timedOut %v", timedOut, err, tt.timedOut)
			}
			if cmd.ProcessState.Exited() {
				t.Errorf("the leader exited by itself (%v); want it killed", cmd.ProcessState)
			}
		})
	}
}
