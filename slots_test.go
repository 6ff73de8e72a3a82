// slots_test.go tests how serve and the provider set their runtime's
// scheduler slots: the rule on recorded sequences, and the logs of a real
// serve and a real provider as their work comes and goes.
package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slotsStep is one event of TestSchedSlots: a prompt starting or ending, or
// the armed narrowing firing.
type slotsStep string

const (
	slotsStart slotsStep = "start"
	slotsEnd   slotsStep = "end"
	slotsFire  slotsStep = "fire"
)

// manualTimer is a narrowing the test fires itself.
type manualTimer struct {
	f       func()
	stopped bool
}

func (m *manualTimer) Stop() bool { was := !m.stopped; m.stopped = true; return was }

func TestSchedSlots(t *testing.T) {
	const bound = 3
	tests := []struct {
		name  string
		steps []slotsStep
		// want is the widths set after the first, narrow one, in order.
		want []bool
		// armed: a narrowing is pending at the end.
		armed bool
	}{
		{"up to the bound stays narrow", repeatSteps(slotsStart, bound), nil, false},
		{"past the bound widens at once", repeatSteps(slotsStart, bound+1), []bool{true}, false},
		{"widens once however many more", repeatSteps(slotsStart, bound+5), []bool{true}, false},
		{"back at the bound arms a narrowing", append(repeatSteps(slotsStart, bound+1), slotsEnd), []bool{true}, true},
		{"the narrowing narrows", append(repeatSteps(slotsStart, bound+1), slotsEnd, slotsFire), []bool{true, false}, false},
		{"a prompt past the bound again cancels the narrowing",
			append(repeatSteps(slotsStart, bound+1), slotsEnd, slotsStart, slotsFire), []bool{true}, false},
		{"ending every prompt arms one narrowing",
			append(repeatSteps(slotsStart, bound+3), append(repeatSteps(slotsEnd, bound+3), slotsFire)...), []bool{true, false}, false},
		{"narrow prompts ending arm nothing", append(repeatSteps(slotsStart, bound), repeatSteps(slotsEnd, bound)...), nil, false},
		{"widens again after narrowing",
			append(append(repeatSteps(slotsStart, bound+1), slotsEnd, slotsFire), slotsStart), []bool{true, false, true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var set []bool
			var timers []*manualTimer
			s := &schedSlots{
				maxBusy: bound,
				set:     func(wide bool) { set = append(set, wide) },
				after: func(d time.Duration, f func()) slotsTimer {
					if d != slotsNarrowAfter {
						t.Errorf("narrowing armed after %v, want %v", d, slotsNarrowAfter)
					}
					m := &manualTimer{f: f}
					timers = append(timers, m)
					return m
				},
			}
			for _, step := range tt.steps {
				switch step {
				case slotsStart:
					s.begin()
				case slotsEnd:
					s.end()
				case slotsFire:
					// Every timer armed so far fires, as a stopped one that
					// fired too late would: only the armed one may act.
					for _, m := range timers {
						m.f()
					}
				}
			}
			if len(set) != len(tt.want) || !equalBools(set, tt.want) {
				t.Errorf("widths set = %v, want %v", set, tt.want)
			}
			if armed := s.timer != nil; armed != tt.armed {
				t.Errorf("a narrowing pending = %v, want %v", armed, tt.armed)
			}
		})
	}
	// A daemon that leaves the runtime alone has no schedSlots.
	var none *schedSlots
	none.begin()
	none.end()
}

func repeatSteps(s slotsStep, n int) []slotsStep {
	out := make([]slotsStep, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func equalBools(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestServeSchedSlots: a real serve starts on one scheduler slot, stays
// there while slotsServeMaxPrompts prompts wait for a permission vote,
// widens when one more starts, and narrows again once they are cancelled.
// With GOMAXPROCS set, it never changes the slots.
func TestServeSchedSlots(t *testing.T) {
	const logged = `msg="scheduler slots"`
	t.Run("adapts", func(t *testing.T) {
		sp := startServe(t, []string{"--workspace", t.TempDir(), "--log-level", "debug", "--sandbox", "off"}, "GOMAXPROCS=")
		lines := func() []string { return grepLines(sp.stderr.String(), logged) }
		waitFor(t, "serve to log its first slots", func() bool { return len(lines()) >= 1 })
		if got := lines(); len(got) != 1 || !strings.Contains(got[0], "gomaxprocs=1") {
			t.Fatalf("at start: %q, want one line with gomaxprocs=1", got)
		}
		var ids []string
		startWaiting := func() {
			id := sp.newSession(t, "")
			stream := sp.openEvents(t, id, "")
			sp.prompt(t, id, `call run_shell_command {"command":"true"}`)
			readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventPermissionRequest })
			ids = append(ids, id)
		}
		for range slotsServeMaxPrompts {
			startWaiting()
		}
		if got := lines(); len(got) != 1 {
			t.Fatalf("with %d prompts running: %q, want the start's line alone", slotsServeMaxPrompts, got)
		}
		startWaiting()
		waitFor(t, "serve to widen", func() bool { return len(lines()) >= 2 })
		// The second line names the runtime's own width, which is the
		// machine's: one on a one-CPU machine.
		if got := lines(); len(got) != 2 {
			t.Fatalf("with %d prompts running: %q, want a second line", slotsServeMaxPrompts+1, got)
		}
		for _, id := range ids {
			if r := sp.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
				t.Fatalf("cancel = %d %s", r.status, r.body)
			}
		}
		waitFor(t, "serve to narrow", func() bool { return len(lines()) >= 3 })
		if got := lines(); len(got) != 3 || !strings.Contains(got[2], "gomaxprocs=1") {
			t.Fatalf("after the prompts ended: %q, want a third line with gomaxprocs=1", got)
		}
	})
	t.Run("GOMAXPROCS set", func(t *testing.T) {
		sp := startServe(t, []string{"--workspace", t.TempDir(), "--log-level", "debug", "--sandbox", "off"}, "GOMAXPROCS=2")
		var ids []string
		for range slotsServeMaxPrompts + 1 {
			id := sp.newSession(t, "")
			stream := sp.openEvents(t, id, "")
			sp.prompt(t, id, `call run_shell_command {"command":"true"}`)
			readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventPermissionRequest })
			ids = append(ids, id)
		}
		if got := grepLines(sp.stderr.String(), logged); len(got) != 0 {
			t.Errorf("with GOMAXPROCS set serve logged %q, want nothing", got)
		}
	})
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// TestProviderSchedSlots: a real provider starts on one scheduler slot,
// widens once more than slotsProviderMaxRequests requests are in progress (each holding back the rest of
// its body), and narrows again once they end. With GOMAXPROCS set, it never
// changes the slots.
func TestProviderSchedSlots(t *testing.T) {
	const logged = `msg="scheduler slots"`
	// holdRequest sends a prepare request's head and the first byte of its
	// body, so that its handler waits for the rest; closing the connection
	// ends it.
	holdRequest := func(t *testing.T, pp *providerProcess) net.Conn {
		c, err := net.Dial("tcp", strings.TrimPrefix(pp.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		head := "POST " + wirePathPrepare + " HTTP/1.1\r\nHost: " + strings.TrimPrefix(pp.url, "http://") +
			"\r\nAuthorization: Bearer " + providerTestToken + "\r\nContent-Type: " + wireContentType + "\r\nContent-Length: 100\r\n\r\n{"
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("adapts", func(t *testing.T) {
		pp := startProviderProcessEnv(t, []string{"GOMAXPROCS="}, "--log-level", "debug")
		lines := func() []string { return grepLines(pp.stderrText(), logged) }
		waitFor(t, "the provider to log its first slots", func() bool { return len(lines()) >= 1 })
		if got := lines(); len(got) != 1 || !strings.Contains(got[0], "gomaxprocs=1") {
			t.Fatalf("at start: %q, want one line with gomaxprocs=1", got)
		}
		var held []net.Conn
		for range slotsProviderMaxRequests + 1 {
			held = append(held, holdRequest(t, pp))
		}
		waitFor(t, "the provider to widen", func() bool { return len(lines()) >= 2 })
		for _, c := range held {
			c.Close()
		}
		waitFor(t, "the provider to narrow", func() bool { return len(lines()) >= 3 })
		if got := lines(); len(got) != 3 || !strings.Contains(got[2], "gomaxprocs=1") {
			t.Fatalf("after the requests ended: %q, want a third line with gomaxprocs=1", got)
		}
	})
	t.Run("GOMAXPROCS set", func(t *testing.T) {
		pp := startProviderProcessEnv(t, []string{"GOMAXPROCS=2"}, "--log-level", "debug")
		for range slotsProviderMaxRequests + 1 {
			holdRequest(t, pp)
		}
		// One answered request: the provider is serving. A provider that
		// set its slots would have logged at start already.
		resp, err := http.Get(pp.url + metricsPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := grepLines(pp.stderrText(), logged); len(got) != 0 {
			t.Errorf("with GOMAXPROCS set the provider logged %q, want nothing", got)
		}
	})
}
