// serve_children_test.go tests serve's acp children: the required-v1
// acknowledgement, the scheduler's slot per workspace, a child that dies or is
// killed mid-turn, what it leaves behind, and the session updates it sends.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFaultChildKilledMidTurn kills the ACP child with SIGKILL while its
// shell tool runs. The session dies visibly, later calls get 410, the tool
// process does not outlive the child that owned it, and under the sandbox
// the session's temp directory, which the child could not remove, is gone.
func TestFaultChildKilledMidTurn(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	opts := guardedYolo(t, ws, prov.guard(t))
	_, noLandlock := probeLandlock()
	if noLandlock == nil {
		opts.Sandbox = workspaceConfig()
	}
	td := startTestDaemon(t, opts, quickRaceExit)
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	td.prompt(t, id, `call run_shell_command {"command":"echo $TMPDIR > tmpdir.txt; echo $$ > sleep.pid; exec sleep 30"}`)
	sleepPID := readPIDFile(t, filepath.Join(ws, "sleep.pid"))
	tmp := strings.TrimSpace(mustRead(t, filepath.Join(ws, "tmpdir.txt")))
	if noLandlock == nil && (!strings.HasPrefix(filepath.Base(tmp), sandboxTempPattern) || !strings.HasPrefix(filepath.Base(filepath.Dir(tmp)), childTempPattern) || absent(t, tmp)) {
		t.Fatalf("TMPDIR %q: want an existing session temp directory in the child's own", tmp)
	}
	t.Cleanup(func() { syscall.Kill(sleepPID, syscall.SIGKILL) })
	child := parentPID(sleepPID)
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/cmdline")
	if child == 0 || parentPID(child) != os.Getpid() || !strings.Contains(string(cmdline), "acp") {
		t.Fatalf("the sleep's parent %d (%q) is not an ACP child of this daemon", child, cmdline)
	}
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionDied })
	if len(evs) == 0 || evs[len(evs)-1].typ != eventSessionDied {
		t.Fatalf("stream ended without session_died: %v", evs)
	}
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"hi"}]}`), http.StatusGone, codeSessionDied)
	if !pidGoneWithin(child, 5*time.Second) {
		t.Errorf("killed ACP child %d still exists", child)
	}
	if !pidGoneWithin(sleepPID, 5*time.Second) {
		t.Errorf("tool process %d (now a child of %d) outlives its SIGKILLed ACP child %d", sleepPID, parentPID(sleepPID), child)
	}
	if noLandlock == nil && !pathGoneWithin(filepath.Dir(tmp), 30*time.Second) {
		t.Errorf("the killed child's temp directory %s, with the session's, is left", filepath.Dir(tmp))
	}
}

func TestServeRejectsUnacknowledgedChannel(t *testing.T) {
	for _, mode := range []string{"", "badack"} {
		t.Run("mode="+mode, func(t *testing.T) {
			prov := newTestProvider(t)
			td := startTestDaemon(t, serveOptions{Guard: prov.guard(t)}, fakeChildEnv(mode))
			wantError(t, td.do(t, "POST", "/session", ""), 503, codeGuardNotReady)
			if _, calls := prov.counts(); calls != 0 {
				t.Errorf("provider saw %d prepares", calls)
			}
		})
	}
}

func TestServeChildDeath(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	_, evs := td.runTurn(t, id, "report pid")
	pid1, _ := strconv.Atoi(texts(t, evs)[0])
	td.prompt(t, id, "die")
	evs = readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionDied })
	if last := parseEnvelope(t, evs[len(evs)-1]); !strings.Contains(string(last.Data), id) {
		t.Errorf("session_died data = %s", last.Data)
	}
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"x"}]}`), 410, codeSessionDied)
	wantError(t, td.do(t, "POST", "/session/"+id+"/cancel", ""), 410, codeSessionDied)
	wantError(t, td.do(t, "GET", "/session/"+id+"/events", ""), 410, codeSessionDied)
	// DELETE says the session had died, and forgets it.
	wantError(t, td.do(t, "DELETE", "/session/"+id, ""), 410, codeSessionDied)
	wantError(t, td.do(t, "DELETE", "/session/"+id, ""), 404, codeSessionNotFound)
	if err := syscall.Kill(pid1, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("dead child %d still exists (kill 0: %v)", pid1, err)
	}
	id2 := td.newSession(t, "")
	_, evs = td.runTurn(t, id2, "report pid")
	if pid2, _ := strconv.Atoi(texts(t, evs)[0]); pid2 == pid1 || pid2 == 0 {
		t.Errorf("new session runs in child %d, old one was %d", pid2, pid1)
	}
}

// TestChildSchedulerSlots: the ACP runtime serve starts runs on one
// scheduler slot unless the operator set GOMAXPROCS (runACP says why).
func TestChildSchedulerSlots(t *testing.T) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		// The children inherit the test's environment: run again without it.
		cmd := exec.Command(testExe(t), "-test.run=^TestChildSchedulerSlots$", "-test.count=1")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOMAXPROCS=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("without GOMAXPROCS: %v\n%s", err, out)
		}
		return
	}
	for _, tt := range []struct {
		name string
		env  []string
		want string
	}{
		{"default", nil, "gomaxprocs=1"},
		{"operator's choice", []string{"GOMAXPROCS=3"}, "gomaxprocs=3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			td := startTestDaemon(t, serveOptions{Workspaces: []string{t.TempDir()}, LogLevel: slog.LevelDebug}, append(tt.env, quickRaceExit)...)
			td.newSession(t, "")
			deadline := time.Now().Add(testTimeout(10 * time.Second))
			for !strings.Contains(td.stderr.String(), `msg="acp runtime ready" managed=false `+tt.want+" ") {
				if time.Now().After(deadline) {
					t.Fatalf("no %q in the child's log:\n%s", tt.want, td.stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The child's start environment may hold the model key: its
			// tools, same user, must not read /proc/<child>/environ.
			if !strings.Contains(td.stderr.String(), `msg="start environment hidden from other processes" dumpable=0`) {
				t.Errorf("the child did not make itself not dumpable:\n%s", td.stderr.String())
			}
		})
	}
}

func TestServeE2EUnacknowledgedChannel(t *testing.T) {
	prov := newTestProvider(t)
	sp := startServe(t, []string{"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL},
		envGuardToken+"="+prov.token, fakeChildEnv("noack"))
	wantError(t, sp.do(t, "POST", "/session", ""), http.StatusServiceUnavailable, codeGuardNotReady)
	if children := childPIDs(t, sp.cmd.Process.Pid); len(children) != 0 {
		t.Errorf("rejected channel left children %v", children)
	}
}

// A session/update reaches the session's stream only when its params are an
// exact object: a member of another name, spelled otherwise or given twice,
// a sessionId that is not a string, or no update, and nothing is published.
func TestServeSessionUpdateParams(t *testing.T) {
	const update = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`
	for _, tt := range []struct {
		params string
		want   bool
	}{
		{`{"sessionId":"s1","update":` + update + `}`, true},
		{` {"_meta":{"a":1}, "update":` + update + `, "sessionId":"s\u0031"} `, true},
		{`{"sessionId":"s1","update":` + update + `,"extra":1}`, false},
		{`{"SessionId":"s1","update":` + update + `}`, false},
		{`{"sessionId":"s1","Update":` + update + `}`, false},
		{`{"sessionId":"s1","sessionId":"s1","update":` + update + `}`, false},
		{`{"sessionId":"s1","update":` + update + `,"update":` + update + `}`, false},
		{`{"sessionId":"s1","update":null}`, false},
		{`{"sessionId":"s1"}`, false},
		{`{"sessionId":1,"update":` + update + `}`, false},
		{`{"sessionId":"s2","update":` + update + `}`, false},
		{`{"update":` + update + `}`, false},
		{`[` + update + `]`, false},
		{`null`, false},
	} {
		_, ch, s := fuzzDaemon(io.Discard)
		ch.onNotify("session/update", json.RawMessage(tt.params))
		evs := replayOf(s.events, 0)
		if got := len(evs) == 1; got != tt.want || len(evs) > 1 {
			t.Errorf("params %s: %d events, want published %v", tt.params, len(evs), tt.want)
			continue
		}
		if tt.want && !bytes.Contains(evs[0].data, []byte(`"data":{"sessionId":"s1","update":`+update+`}`)) {
			t.Errorf("params %s: event %s does not carry the update as sent", tt.params, evs[0].data)
		}
	}
}

// TestChildTempDirGoneWithServe: a serve in required mode makes its
// child's temp directory under --sandbox-temp; killed with SIGKILL it reaps
// nothing, and its managed child, ended by its parent's death, removes that
// directory, the session's inside it first.
func TestChildTempDirGoneWithServe(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	args, guardEnv := guardArgs(t, newTestProvider(t), ws, filepath.Join(t.TempDir(), "decisions.jsonl"))
	base := t.TempDir()
	// envTestSandbox empty: the real sandbox, not the suite's override.
	sp := startServe(t, append(args, "--"+flagSandboxTemp, base), guardEnv, envTestSandbox+"=")
	id := sp.newSession(t, "")
	sp.runTurn(t, id, shellCall(`echo "$TMPDIR" > tmpdir.txt`, false))
	tmp := strings.TrimSpace(mustRead(t, filepath.Join(ws, "tmpdir.txt")))
	parent := filepath.Dir(tmp)
	if !strings.HasPrefix(filepath.Base(parent), childTempPattern) || filepath.Dir(parent) != base || absent(t, tmp) {
		t.Fatalf("TMPDIR %q: want an existing session temp directory in the child's own, under --%s %s", tmp, flagSandboxTemp, base)
	}
	if err := sp.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if !pathGoneWithin(parent, 30*time.Second) {
		t.Errorf("the child's temp directory %s outlives serve and the child", parent)
	}
}
