// serve_events_qwen_test.go tests the Qwen wire keys a host reads from a
// prompt and its event stream: the 202 body, the stream headers, the
// envelope meta, and replay across a reconnect.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// openQwenStream opens a session's event stream as a Qwen Code host does,
// with its resume headers when given, and returns the response headers.
func openQwenStream(t *testing.T, td *testDaemon, id, lastEventID, epoch string) (*bufio.Reader, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(60*time.Second))
	req, _ := http.NewRequestWithContext(ctx, "GET", td.url+"/session/"+id+"/events", nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	if epoch != "" {
		req.Header.Set("X-Qwen-Event-Epoch", epoch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET events = %d", resp.StatusCode)
	}
	return bufio.NewReader(resp.Body), resp.Header
}

// qwenPrompt posts a prompt and decodes the 202 as a host would, keeping
// the JSON types of its members.
func qwenPrompt(t *testing.T, td *testDaemon, id, text string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": text}}})
	r := td.do(t, "POST", "/session/"+id+"/prompt", string(body))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST prompt = %d %s", r.status, r.body)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	var res map[string]any
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("prompt 202 body %s: %v", r.body, err)
	}
	return res
}

// TestServeQwenWire pins the frame of Qwen Code 0.24.4's serve that a host
// reads (DESIGN.md §7): the prompt's 202 keys, the stream's epoch and id
// headers, _meta.serverTimestamp on every event, sessionId in
// turn_complete, and a resume with the same epoch that continues the ids.
func TestServeQwenWire(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream, h := openQwenStream(t, td, id, "", "")
	epoch, streamID := h.Get("X-Qwen-Event-Epoch"), h.Get("X-Qwen-SSE-Stream-Id")
	if epoch == "" || streamID == "" {
		t.Fatalf("event stream headers: X-Qwen-Event-Epoch %q, X-Qwen-SSE-Stream-Id %q, want both", epoch, streamID)
	}

	before := time.Now().UnixMilli()
	res := qwenPrompt(t, td, id, "report pid")
	pid, _ := res["promptId"].(string)
	last, isNum := res["lastEventId"].(json.Number)
	if _, err := last.Int64(); pid == "" || !isNum || err != nil || res["eventEpoch"] != epoch {
		t.Fatalf("prompt 202 = %v, want promptId a string, lastEventId a number, eventEpoch %q", res, epoch)
	}
	first, _ := last.Int64()
	evs := readSSE(t, stream, untilTurnEnd(pid))
	after := time.Now().UnixMilli()
	var maxID int64
	for _, ev := range evs {
		env := parseEnvelope(t, ev)
		if ts := env.Meta.ServerTimestamp; ts < before || ts > after {
			t.Errorf("event %s %s: _meta.serverTimestamp %d, want Unix ms in [%d, %d]", ev.id, ev.typ, ts, before, after)
		}
		if env.PromptID == pid && env.ID <= first {
			t.Errorf("event %d of the turn is not after the 202's lastEventId %d", env.ID, first)
		}
		maxID = max(maxID, env.ID)
	}
	end := evs[len(evs)-1]
	var tc turnComplete
	if end.typ != eventTurnComplete || decodeStrict(parseEnvelope(t, end).Data, &tc) != nil || tc.SessionID != id || tc.PromptID != pid {
		t.Fatalf("turn ended with %s %s, want turn_complete with sessionId %q", end.typ, end.data, id)
	}

	res2 := qwenPrompt(t, td, id, "report pid")
	pid2, _ := res2["promptId"].(string)
	if n, err := res2["lastEventId"].(json.Number).Int64(); err != nil || n < maxID || res2["eventEpoch"] != epoch {
		t.Errorf("second prompt 202 = %v, want lastEventId >= %d and eventEpoch %q", res2, maxID, epoch)
	}
	readSSE(t, stream, untilTurnEnd(pid2))

	// A reconnect with the epoch and the last id seen of the first turn
	// replays what follows it, on a new stream of the same epoch.
	replay, h2 := openQwenStream(t, td, id, strconv.FormatInt(maxID, 10), epoch)
	if h2.Get("X-Qwen-Event-Epoch") != epoch || h2.Get("X-Qwen-SSE-Stream-Id") == "" || h2.Get("X-Qwen-SSE-Stream-Id") == streamID {
		t.Errorf("reconnect headers: epoch %q (want %q), stream id %q (want a new one, not %q)", h2.Get("X-Qwen-Event-Epoch"), epoch, h2.Get("X-Qwen-SSE-Stream-Id"), streamID)
	}
	again := readSSE(t, replay, untilTurnEnd(pid2))
	if len(again) == 0 || parseEnvelope(t, again[0]).ID != maxID+1 {
		t.Fatalf("replay after %d = %v, want it to continue at %d", maxID, again, maxID+1)
	}
}
