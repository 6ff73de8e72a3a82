// serve_sessions_echo_test.go tests the frames serve itself adds to a turn,
// as Qwen Code's daemon does (DESIGN.md §7): the user_message_chunk echo of
// each text block that opens a turn, and prompt_cancelled ahead of what a
// cancel causes, with turn_complete "cancelled".
package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestServeEchoesPromptTextFirst(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": "report pid"}, {"type": "text", "text": "\nreport env"}}})
	r := td.do(t, "POST", "/session/"+id+"/prompt", string(body))
	var acc promptAccepted
	if r.status != http.StatusAccepted || decodeStrict(r.body, &acc) != nil {
		t.Fatalf("POST prompt = %d %s", r.status, r.body)
	}
	var turn []envelope
	for _, ev := range readSSE(t, stream, untilTurnEnd(acc.PromptID)) {
		if e := parseEnvelope(t, ev); e.PromptID == acc.PromptID {
			turn = append(turn, e)
		}
	}
	if len(turn) < 3 {
		t.Fatalf("turn = %v", turn)
	}
	for i, want := range []string{"report pid", "\nreport env"} {
		var d struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionUpdate string      `json:"sessionUpdate"`
				Content       textContent `json:"content"`
				Meta          echoMeta    `json:"_meta"`
			} `json:"update"`
		}
		e := turn[i]
		if e.Type != eventSessionUpdate || decodeStrict(e.Data, &d) != nil || d.SessionID != id ||
			d.Update.SessionUpdate != "user_message_chunk" || d.Update.Content != (textContent{"text", want}) ||
			d.Update.Meta.Source != "bridge-echo" || d.Update.Meta.ServerTimestamp == 0 {
			t.Errorf("turn frame %d = %s %s, want the user_message_chunk echo of %q", i, e.Type, e.Data, want)
		}
	}
	if got := turn[2]; got.Type != eventSessionUpdate || strings.Contains(string(got.Data), `user_message_chunk`) {
		t.Errorf("frame after the echo = %s %s, want the child's first update", got.Type, got.Data)
	}
}

// TestServeCancelPublishesPromptCancelled: a cancel during a permission
// round is announced by prompt_cancelled before the permission_resolved
// and the turn_complete it causes; the turn ends "cancelled".
func TestServeCancelPublishesPromptCancelled(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	pid := td.prompt(t, id, "permission")
	readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventPermissionRequest })
	if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel = %d %s", r.status, r.body)
	}
	var types []string
	var cancelled promptCancelledEvent
	var end turnComplete
	for _, ev := range readSSE(t, stream, untilTurnEnd(pid)) {
		e := parseEnvelope(t, ev)
		types = append(types, ev.typ)
		switch ev.typ {
		case eventPromptCancelled:
			if e.PromptID != pid || decodeStrict(e.Data, &cancelled) != nil || cancelled != (promptCancelledEvent{SessionID: id}) {
				t.Errorf("prompt_cancelled = %s, want promptId %s and data {sessionId}", ev.data, pid)
			}
		case eventPermissionResolved:
			var res permissionResolvedEvent
			if decodeStrict(e.Data, &res) != nil || res.Outcome != voteCancelled {
				t.Errorf("permission_resolved = %s, want outcome cancelled", e.Data)
			}
		case eventTurnComplete:
			if decodeStrict(e.Data, &end) != nil {
				t.Errorf("turn_complete = %s", e.Data)
			}
		}
	}
	at := slices.Index(types, eventPromptCancelled)
	if at < 0 || at > slices.Index(types, eventPermissionResolved) || at > slices.Index(types, eventTurnComplete) {
		t.Errorf("events after cancel = %v, want prompt_cancelled before permission_resolved and turn_complete", types)
	}
	if slices.Index(types, eventPermissionResolved) < 0 {
		t.Errorf("events after cancel = %v, want a permission_resolved", types)
	}
	if end.StopReason != "cancelled" || end.PromptID != pid || end.PromptCancelled == nil || end.PromptCancelled.CancelledAt == 0 || end.PromptCancelled.ElapsedMs < 0 {
		t.Errorf("turn_complete = %+v, want stopReason cancelled with promptCancelled", end)
	}

	// A cancel with no prompt running announces nothing.
	if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("idle cancel = %d %s", r.status, r.body)
	}
	pid2 := td.prompt(t, id, "report pid")
	for _, ev := range readSSE(t, stream, untilTurnEnd(pid2)) {
		if ev.typ == eventPromptCancelled {
			t.Errorf("idle cancel or the next turn published %s", ev.data)
		}
	}
}

// TestServeCancelRightAfterPromptEndsTurn: a cancel that follows the prompt
// at once, whether the prompt is still queued, taken but not yet sent to
// the child, or running, ends the turn promptly "cancelled", announced by
// the host's prompt_cancelled: the child never sees the cancel before the
// prompt and runs a prompt it can no longer be told to stop.
func TestServeCancelRightAfterPromptEndsTurn(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	events := make(chan sseEvent, 64)
	go func() {
		defer close(events)
		stream := td.openEvents(t, id, "")
		var cur sseEvent
		for {
			line, err := stream.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "" && cur.typ != "":
				events <- cur
				cur = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				cur.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				cur.data = json.RawMessage(line[6:])
			}
		}
	}()
	for i := range 40 {
		pid := td.prompt(t, id, "wait")
		if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
			t.Fatalf("cancel %d = %d %s", i, r.status, r.body)
		}
		limit := time.After(testTimeout(5 * time.Second))
		announced := false
		for done := false; !done; {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("turn %d: the event stream ended", i)
				}
				e := parseEnvelope(t, ev)
				if e.PromptID != pid {
					continue
				}
				switch ev.typ {
				case eventPromptCancelled:
					var c promptCancelledEvent
					if decodeStrict(e.Data, &c) != nil || c != (promptCancelledEvent{SessionID: id}) {
						t.Errorf("turn %d: prompt_cancelled = %s, want the host's", i, e.Data)
					}
					announced = true
				case eventTurnComplete:
					var end turnComplete
					if decodeStrict(e.Data, &end) != nil || end.StopReason != stopCancelled || end.PromptCancelled == nil {
						t.Fatalf("turn %d: turn_complete = %s, want stopReason cancelled with promptCancelled", i, e.Data)
					}
					if !announced {
						t.Errorf("turn %d: turn_complete without a prompt_cancelled before it", i)
					}
					done = true
				case eventTurnError:
					t.Fatalf("turn %d: turn_error %s", i, e.Data)
				}
			case <-limit:
				t.Fatalf("turn %d: no turn_complete %v after the cancel: the child runs a prompt serve cancelled", i, testTimeout(5*time.Second))
			}
		}
	}
}
