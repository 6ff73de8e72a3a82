// serve_model_settings_test.go tests that a session's model.name and
// model.maxSessionTurns are its own workspace's (DESIGN.md §10): under serve,
// whose model calls take them from the session's workspace settings as serve
// read them, with a real serve, real children and a fake model service on
// loopback; and under a standalone acp.
package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// toolLoopModel is a chat completions service that proposes one glob call
// to a prompt and ends the turn once it reads a tool result, so that a
// prompt needs two model calls. It records the model each call names.
type toolLoopModel struct {
	srv *httptest.Server

	mu     sync.Mutex
	models []string
}

func newToolLoopModel(t *testing.T) *toolLoopModel {
	m := &toolLoopModel{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req openAIRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("model request: %v", err)
		}
		m.mu.Lock()
		m.models = append(m.models, req.Model)
		m.mu.Unlock()
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == roleTool {
			sseReply(events(textChunk("done"), finishChunk("stop"), "[DONE]"))(w, r)
			return
		}
		sseReply(events(toolChunk(0, "call_g", "glob", `{"pattern":"*.none"}`), finishChunk("tool_calls"), "[DONE]"))(w, r)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// take returns the models named since the last take.
func (m *toolLoopModel) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.models
	m.models = nil
	return out
}

// stopReason is the stopReason of a turn's turn_complete, "" when it ended
// otherwise.
func stopReason(t *testing.T, evs []sseEvent) string {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].typ != eventTurnComplete {
		return ""
	}
	var d struct {
		StopReason string `json:"stopReason"`
	}
	json.Unmarshal(parseEnvelope(t, evs[len(evs)-1]).Data, &d)
	return d.StopReason
}

// activeChildren is GET /daemon/status's count of live ACP children.
func activeChildren(t *testing.T, td *testDaemon) int {
	t.Helper()
	var st struct {
		Runtime struct {
			Children struct {
				Active int `json:"active"`
			} `json:"children"`
		} `json:"runtime"`
	}
	if err := json.Unmarshal(td.do(t, "GET", "/daemon/status", "").body, &st); err != nil {
		t.Fatal(err)
	}
	return st.Runtime.Children.Active
}

// TestServeModelNameOfItsWorkspace: two workspaces naming different models,
// their sessions on one child: each session's model calls name its own
// workspace's model, whichever workspace's session started the child; a
// workspace that names none has no session. OPENAI_MODEL, given to serve,
// names the model of every session.
func TestServeModelNameOfItsWorkspace(t *testing.T) {
	fm := newToolLoopModel(t)
	// The third workspace's layers name no model.
	wss := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	for i, ws := range wss[:2] {
		writeFileAll(t, filepath.Join(ws, ".qwen", "settings.json"), `{"model":{"name":"m-`+strconv.Itoa(i)+`"}}`)
	}
	writeFileAll(t, filepath.Join(wss[2], ".qwen", "settings.json"), `{"model":{"name":""}}`)
	base := []string{envModelBaseURL + "=" + fm.srv.URL + "/v1", envModelKey + "="}
	// The second serve runs beside the first: each on a port of its own.
	port := []string{"--port", "0"}
	td := startParsedPool(t, wss, port, append(base, envModelName+"=")...)
	for _, i := range []int{1, 0} {
		_, evs := td.runTurn(t, td.sessionIn(t, wss[i]), "hello")
		want := "m-" + strconv.Itoa(i)
		if got := fm.take(); len(got) != 2 || got[0] != want || got[1] != want {
			t.Errorf("session in workspace %d: model calls named %q, want %q twice; turn ended %q", i, got, want, stopReason(t, evs))
		}
	}
	if n := activeChildren(t, td); n != 1 {
		t.Errorf("%d ACP children, want one", n)
	}
	r := td.do(t, "POST", "/session", `{"cwd":`+strconv.Quote(wss[2])+`}`)
	wantError(t, r, http.StatusBadRequest, codeBadRequest)
	if want := `names no model; set OPENAI_MODEL for serve or model.name in its settings`; !strings.Contains(string(r.body), want) {
		t.Errorf("session in a workspace that names no model: %s, want an error saying %q", r.body, want)
	}

	td = startParsedPool(t, wss, port, append(base, envModelName+"=env-model")...)
	for i, ws := range wss {
		td.runTurn(t, td.sessionIn(t, ws), "hello")
		if got := fm.take(); len(got) != 2 || got[0] != "env-model" || got[1] != "env-model" {
			t.Errorf("OPENAI_MODEL given: session in workspace %d: model calls named %q, want env-model twice", i, got)
		}
	}
}

// TestServeMaxTurnsOfItsWorkspace: serve's first workspace allows one model
// call per prompt, the second the default, a third one again: on one child,
// the first and third workspaces' prompts stop after one call with
// max_turn_requests, the second's completes its two calls.
func TestServeMaxTurnsOfItsWorkspace(t *testing.T) {
	fm := newToolLoopModel(t)
	wss := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	writeFileAll(t, filepath.Join(wss[0], ".qwen", "settings.json"), `{"model":{"maxSessionTurns":1}}`)
	writeFileAll(t, filepath.Join(wss[2], ".qwen", "settings.json"), `{"model":{"maxTurns":1}}`)
	td := startParsedPool(t, wss, nil, envModelBaseURL+"="+fm.srv.URL+"/v1", envModelKey+"=", envModelName+"=m")
	for i, ws := range wss {
		_, evs := td.runTurn(t, td.sessionIn(t, ws), "hello")
		calls, stop := len(fm.take()), stopReason(t, evs)
		wantCalls, wantStop := 1, stopMaxTurnRequests
		if i == 1 {
			wantCalls, wantStop = 2, stopEndTurn
		}
		if calls != wantCalls || stop != wantStop {
			t.Errorf("session in workspace %d: %d model calls, stop reason %q; want %d, %q; last event %s", i, calls, stop, wantCalls, wantStop, evs[len(evs)-1].data)
		}
	}
	if n := activeChildren(t, td); n != 1 {
		t.Errorf("%d ACP children, want one", n)
	}
}

// TestServeUntrustedWorkspaceModelSettings: in required mode a workspace
// file is untrusted: it names its sessions' model, as Qwen Code lets a
// workspace do, but neither its model.baseUrl nor its env block moves the
// calls elsewhere or renames the model, and the operator's
// model.maxSessionTurns wins over its own.
func TestServeUntrustedWorkspaceModelSettings(t *testing.T) {
	fm := newToolLoopModel(t)
	elsewhere := newToolLoopModel(t)
	prov := newTestProvider(t)
	wsA, wsB := t.TempDir(), t.TempDir()
	writeFileAll(t, filepath.Join(wsA, ".qwen", "settings.json"), `{"model":{"name":"m-a"}}`)
	writeFileAll(t, filepath.Join(wsB, ".qwen", "settings.json"), `{
  "model": {"name": "m-b", "maxSessionTurns": 5, "baseUrl": "`+elsewhere.srv.URL+`/v1"},
  "env": {"OPENAI_MODEL": "env-b", "OPENAI_BASE_URL": "`+elsewhere.srv.URL+`/v1"}
}`)
	operator := writeSettings(t, `{"tools":{"approvalMode":"yolo"},"model":{"maxSessionTurns":1}}`)
	args := []string{"--workspace", wsA, "--workspace", wsB, "--max-children", "1", "--settings", operator,
		"--decision-log", filepath.Join(t.TempDir(), "d.jsonl"),
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL}
	sp := startServe(t, args, envGuardToken+"="+prov.token, "HOME="+t.TempDir(), envQwenHome+"=",
		envModelBaseURL+"="+fm.srv.URL+"/v1", envModelKey+"=", envModelName+"=")
	for _, tt := range []struct{ ws, model string }{{wsB, "m-b"}, {wsA, "m-a"}} {
		_, evs := sp.runTurn(t, sp.sessionIn(t, tt.ws), "hello")
		if got, stop := fm.take(), stopReason(t, evs); !slices.Equal(got, []string{tt.model}) || stop != stopMaxTurnRequests {
			t.Errorf("session in %s: model calls named %q, stop reason %q; want one call naming %q, %q\n%s", tt.ws, got, stop, tt.model, stopMaxTurnRequests, sp.stderr.String())
		}
	}
	if got := elsewhere.take(); len(got) != 0 {
		t.Errorf("the workspace's own model service got %d calls", len(got))
	}
	if log := sp.stderr.String(); !strings.Contains(log, `drop key \"model.baseUrl\"`) || !strings.Contains(log, `drop key \"env\"`) {
		t.Errorf("the log does not say the untrusted keys were dropped:\n%s", log)
	}
}

// TestACPModelNameOfItsWorkspace: a standalone acp names, in each session's
// model calls, the model of that session's workspace (a workspace without
// one: the user file's); OPENAI_MODEL names every session's.
func TestACPModelNameOfItsWorkspace(t *testing.T) {
	rec := &modelRequests{}
	srv := httptest.NewServer(rec.handler(t))
	t.Cleanup(srv.Close)
	qwenHome := t.TempDir()
	writeFileAll(t, filepath.Join(qwenHome, "settings.json"), `{"model":{"name":"m-user"}}`)
	plain, named, unnamed := t.TempDir(), t.TempDir(), t.TempDir()
	writeFileAll(t, filepath.Join(named, ".qwen", "settings.json"), `{"model":{"name":"m-named"}}`)
	writeFileAll(t, filepath.Join(unnamed, ".qwen", "settings.json"), `{"model":{"name":""}}`)
	for _, tt := range []struct {
		env   string
		wants []string
	}{
		{"", []string{"m-named", "m-user"}},
		{"env-model", []string{"env-model", "env-model"}},
	} {
		c := startACP(t, nil, []string{"--" + flagGuardMode + "=" + guardModeOff}, "OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=",
			envModelName+"="+tt.env, envQwenHome+"="+qwenHome, "HOME="+t.TempDir(), envSystemMD+"=")
		c.mustCall(methodInitialize, initializeParams(""), nil)
		for i, ws := range []string{named, plain} {
			before, _ := rec.all()
			if stop := c.prompt(c.newSession(ws), "hello", ""); stop != stopEndTurn {
				t.Fatalf("stop reason %q, want %q", stop, stopEndTurn)
			}
			reqs, _ := rec.all()
			if len(reqs) != len(before)+1 || reqs[len(reqs)-1].Model != tt.wants[i] {
				t.Errorf("OPENAI_MODEL %q: session in %s: %d model calls, the last naming %q; want one naming %q", tt.env, ws, len(reqs)-len(before), reqs[len(reqs)-1].Model, tt.wants[i])
			}
		}
		r := c.call(methodSessionNew, map[string]any{"cwd": unnamed, "mcpServers": []any{}})
		if tt.env == "" {
			want := `session/new: workspace "` + unnamed + `" names no model; set OPENAI_MODEL or model.name in its settings`
			if r.Error == nil || r.Error.Message != want {
				t.Errorf("session/new in a workspace that names no model = %+v, want the error %q", r.Error, want)
			}
		} else if r.Error != nil {
			t.Errorf("OPENAI_MODEL %q: session/new in a workspace that names no model: %v", tt.env, r.Error.Message)
		}
	}
}
