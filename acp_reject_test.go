// acp_reject_test.go tests how a permission round ends a call as Qwen Code
// 0.24.4 does (DESIGN.md §10): the user's reject ends the turn with no
// further model call, a cancel cancels the prompt, and the model later sees
// the text the client saw.
package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// rejectModel is an OpenAI-compatible service that answers its first
// request with one write_file call and every later one with text, keeping
// each request's messages.
type rejectModel struct {
	mu       sync.Mutex
	requests []string
}

func (m *rejectModel) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.requests = append(m.requests, string(b))
		n := len(m.requests)
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,`+
				`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"file_path\":\"out.txt\",\"content\":\"hi\"}"}}]}}]}`)
			return
		}
		io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"as you wish"}}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func (m *rejectModel) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.requests...)
}

func TestACPRejectEndsTheTurn(t *testing.T) {
	const rejectText = `Tool "write_file" was canceled by the user.`
	for _, tt := range []struct {
		name   string
		answer any
	}{
		{"reject option", selected(optionCancel)},
		{"legacy reject_once", selected("reject_once")},
		{"cancelled outcome without a cancel", map[string]any{"outcome": map[string]any{"outcome": outcomeCancelled}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var model rejectModel
			c := startACP(t, func(method string, params json.RawMessage) (any, *rpcError) {
				if method == methodRequestPermission {
					return tt.answer, nil
				}
				return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
			}, nil, envModelBaseURL+"="+model.start(t), envModelName+"=test-model", envModelKey+"=k")
			c.mustCall(methodInitialize, initializeParams(""), nil)
			dir := t.TempDir()
			sid := c.newSession(dir) // default mode: writes ask
			if stop := c.prompt(sid, "write it", ""); stop != stopEndTurn {
				t.Errorf("stopReason = %q, want %q", stop, stopEndTurn)
			}
			if got := len(model.seen()); got != 1 {
				t.Fatalf("model requests = %d, want 1: a reject ends the turn", got)
			}
			if fileExists(filepath.Join(dir, "out.txt")) {
				t.Error("the rejected write ran")
			}
			statuses, text, _ := callOutcome(c.sessionUpdates(sid), "call_1")
			if len(statuses) == 0 || statuses[len(statuses)-1] != "failed" || text != rejectText {
				t.Errorf("call statuses %v, text %q; want failed %q", statuses, text, rejectText)
			}
			// The next prompt's model request carries the same text as the
			// call's result.
			c.prompt(sid, "ok then", "")
			reqs := model.seen()
			if len(reqs) != 2 {
				t.Fatalf("model requests = %d, want 2", len(reqs))
			}
			want, _ := json.Marshal(rejectText)
			if !strings.Contains(reqs[1], `"tool_call_id":"call_1"`) || !strings.Contains(reqs[1], string(want[1:len(want)-1])) {
				t.Errorf("second model request %s\nwant the tool result %q", reqs[1], rejectText)
			}
		})
	}
}

func TestACPCancelDuringPermissionRound(t *testing.T) {
	var model rejectModel
	var c *acpClient
	ready := make(chan struct{})
	var sid string
	c = startACP(t, func(method string, params json.RawMessage) (any, *rpcError) {
		if method != methodRequestPermission {
			return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
		}
		<-ready
		// An ACP client cancels the prompt, then answers its pending
		// requests cancelled.
		c.send(map[string]any{"jsonrpc": "2.0", "method": methodSessionCancel, "params": map[string]string{"sessionId": sid}})
		return map[string]any{"outcome": map[string]any{"outcome": outcomeCancelled}}, nil
	}, nil, envModelBaseURL+"="+model.start(t), envModelName+"=test-model", envModelKey+"=k")
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid = c.newSession(dir)
	close(ready)
	if stop := c.prompt(sid, "write it", ""); stop != stopCancelled {
		t.Errorf("stopReason = %q, want %q", stop, stopCancelled)
	}
	if got := len(model.seen()); got != 1 {
		t.Errorf("model requests = %d, want 1", got)
	}
	if fileExists(filepath.Join(dir, "out.txt")) {
		t.Error("the cancelled write ran")
	}
	const want = "Tool call was cancelled before execution."
	if statuses, text, _ := callOutcome(c.sessionUpdates(sid), "call_1"); len(statuses) == 0 || statuses[len(statuses)-1] != "failed" || text != want {
		t.Errorf("call statuses %v, text %q; want failed %q", statuses, text, want)
	}
}
