// serve_pool_test.go tests how serve places sessions on its children
// (serve_children.go): sessions of every workspace share a bounded set of
// processes, each session's tools still run in its own workspace, and a
// child that dies takes only its own sessions.
package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// poolDaemon is an off-mode daemon in the yolo approval mode over n fresh
// workspaces, running at most maxChildren children.
func poolDaemon(t *testing.T, n, maxChildren int) (*testDaemon, []string) {
	t.Helper()
	var wss []string
	for range n {
		wss = append(wss, t.TempDir())
	}
	settings := filepath.Join(t.TempDir(), "settings.json")
	mustWrite(t, settings, `{"tools":{"approvalMode":"yolo"}}`)
	td := startTestDaemon(t, serveOptions{Workspaces: wss, SettingsFile: settings, Limits: serveLimits{MaxChildren: maxChildren}}, quickRaceExit)
	return td, wss
}

// sessionIn creates a session whose cwd is ws.
func (td *testDaemon) sessionIn(t *testing.T, ws string) string {
	t.Helper()
	return td.newSession(t, `{"cwd":`+strconv.Quote(ws)+`}`)
}

// childOf runs a shell in session id that writes its directory and its
// parent, the session's ACP child, to files in its cwd ws, and returns that
// directory and the child's pid.
func (td *testDaemon) childOf(t *testing.T, id, ws string) (dir string, pid int) {
	t.Helper()
	_, evs := td.runTurn(t, id, `call run_shell_command {"command":"pwd -P > where.txt; echo $PPID > ppid.txt"}`)
	where, err := os.ReadFile(filepath.Join(ws, "where.txt"))
	if err != nil {
		t.Fatalf("session %s: the shell wrote no where.txt in its workspace %s: %v; events %v", id, ws, err, evs)
	}
	ppid, _ := os.ReadFile(filepath.Join(ws, "ppid.txt"))
	pid, err = strconv.Atoi(strings.TrimSpace(string(ppid)))
	if err != nil {
		t.Fatalf("session %s: ppid.txt = %q", id, ppid)
	}
	return strings.TrimSpace(string(where)), pid
}

func physical(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestServePoolOneChildManyWorkspaces: with --max-children 1 the sessions of
// three workspaces all live on one child process, and each one's tools run
// in, and write to, its own workspace.
func TestServePoolOneChildManyWorkspaces(t *testing.T) {
	td, wss := poolDaemon(t, 3, 1)
	ids := make([]string, len(wss))
	for i, ws := range wss {
		ids[i] = td.sessionIn(t, ws)
	}
	children := map[int]bool{}
	for i, ws := range wss {
		dir, pid := td.childOf(t, ids[i], ws)
		if dir != physical(t, ws) {
			t.Errorf("session %d's shell ran in %q, want its workspace %q", i, dir, ws)
		}
		children[pid] = true
		name := "mine-" + strconv.Itoa(i) + ".txt"
		td.runTurn(t, ids[i], `call write_file {"file_path":"`+name+`","content":"`+strconv.Itoa(i)+`"}`)
		for j, other := range wss {
			data, err := os.ReadFile(filepath.Join(other, name))
			switch {
			case j == i && (err != nil || string(data) != strconv.Itoa(i)):
				t.Errorf("session %d's write_file: %s in its workspace = %q, %v", i, name, data, err)
			case j != i && err == nil:
				t.Errorf("session %d's write_file landed in workspace %d too", i, j)
			}
		}
	}
	if len(children) != 1 {
		t.Errorf("sessions of 3 workspaces ran in children %v, want one", children)
	}
	m := td.scrape(t)
	if m["acpguard_serve_children_started_total"] != 1 || m["acpguard_serve_children"] != 1 || m["acpguard_serve_max_children"] != 1 {
		t.Errorf("children metrics = started %v, live %v, limit %v; want 1, 1, 1",
			m["acpguard_serve_children_started_total"], m["acpguard_serve_children"], m["acpguard_serve_max_children"])
	}
}

// TestServePoolSettingsPerSession: on one child, each session follows its
// own workspace's settings file, not the file of the workspace whose
// session started the child.
func TestServePoolSettingsPerSession(t *testing.T) {
	td, wss := poolDaemon(t, 2, 1)
	writeFileAll(t, filepath.Join(wss[1], ".qwen", "settings.json"), `{"permissions":{"deny":["Bash(touch blocked.txt)"]}}`)
	a, b := td.sessionIn(t, wss[0]), td.sessionIn(t, wss[1])
	for i, id := range []string{a, b} {
		td.runTurn(t, id, `call run_shell_command {"command":"touch blocked.txt"}`)
		if got, want := fileExists(filepath.Join(wss[i], "blocked.txt")), i == 0; got != want {
			t.Errorf("session in workspace %d: blocked.txt exists = %v, want %v", i, got, want)
		}
	}
	if _, childA := td.childOf(t, a, wss[0]); childA == 0 {
		t.Fatal("no child")
	} else if _, childB := td.childOf(t, b, wss[1]); childB != childA {
		t.Errorf("sessions ran in children %d and %d, want one", childA, childB)
	}
}

// TestServePoolBoundUnderConcurrentCreates: concurrent creates in several
// workspaces never start more children than --max-children, and spread
// over them.
func TestServePoolBoundUnderConcurrentCreates(t *testing.T) {
	const sessions = 8
	td, wss := poolDaemon(t, 4, 2)
	ids := make([]string, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			r := td.do(t, "POST", "/session", threadScope(t, `{"cwd":`+strconv.Quote(wss[i%len(wss)])+`}`))
			var res newSessionResponse
			if r.status != http.StatusOK || decodeStrict(r.body, &res) != nil {
				t.Errorf("POST /session %d = %d %s", i, r.status, r.body)
				return
			}
			ids[i] = res.SessionID
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	m := td.scrape(t)
	if m["acpguard_serve_children_started_total"] != 2 || m["acpguard_serve_children"] != 2 {
		t.Errorf("%d concurrent creates with --max-children 2: started %v children, %v live; want 2, 2",
			sessions, m["acpguard_serve_children_started_total"], m["acpguard_serve_children"])
	}
	var status daemonStatusBody
	if r := td.do(t, "GET", "/daemon/status", ""); decodeStrict(r.body, &status) != nil || status.Runtime.Children.Active != 2 || status.Limits.MaxChildren != 2 {
		t.Errorf("/daemon/status = %s, want 2 children active and maxChildren 2", r.body)
	}
	children := map[int]int{}
	for i, id := range ids {
		_, pid := td.childOf(t, id, wss[i%len(wss)])
		children[pid]++
	}
	if len(children) != 2 {
		t.Errorf("sessions per child = %v, want the 8 sessions on both children", children)
	}
}

// TestServePoolChildDeathTakesOnlyItsSessions: a second session goes to a
// second child; killing the first child ends only the first session (410),
// the other still prompts, and the next create refills the free slot.
func TestServePoolChildDeathTakesOnlyItsSessions(t *testing.T) {
	td, wss := poolDaemon(t, 2, 2)
	a, b := td.sessionIn(t, wss[0]), td.sessionIn(t, wss[1])
	_, childA := td.childOf(t, a, wss[0])
	_, childB := td.childOf(t, b, wss[1])
	if childA == childB {
		t.Fatalf("two sessions with --max-children 2 share child %d, want one each", childA)
	}
	stream := td.openEvents(t, a, "")
	if err := syscall.Kill(childA, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionDied })
	if len(evs) == 0 || evs[len(evs)-1].typ != eventSessionDied {
		t.Fatalf("session on the killed child: stream ended without session_died: %v", evs)
	}
	wantError(t, td.do(t, "POST", "/session/"+a+"/prompt", `{"prompt":[{"type":"text","text":"hi"}]}`), http.StatusGone, codeSessionDied)
	if _, pid := td.childOf(t, b, wss[1]); pid != childB {
		t.Errorf("the other session moved from child %d to %d", childB, pid)
	}
	c := td.sessionIn(t, wss[0])
	if _, pid := td.childOf(t, c, wss[0]); pid == childA || pid == childB {
		t.Errorf("a session created after child %d died runs in child %d, want a new one", childA, pid)
	}
	m := td.scrape(t)
	if m["acpguard_serve_children_started_total"] != 3 || m["acpguard_serve_children"] != 2 || m["acpguard_serve_children_died_total"] != 1 {
		t.Errorf("children metrics = started %v, live %v, died %v; want 3, 2, 1",
			m["acpguard_serve_children_started_total"], m["acpguard_serve_children"], m["acpguard_serve_children_died_total"])
	}
}

// TestServePoolIdleChildEnds: a child that carries no session for the idle
// timeout is ended, not counted as a death, and the next create starts a
// new one.
func TestServePoolIdleChildEnds(t *testing.T) {
	ws := t.TempDir()
	settings := filepath.Join(t.TempDir(), "settings.json")
	mustWrite(t, settings, `{"tools":{"approvalMode":"yolo"}}`)
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, SettingsFile: settings,
		Limits: serveLimits{SessionIdleTimeout: time.Second}}, quickRaceExit)
	id := td.sessionIn(t, ws)
	_, first := td.childOf(t, id, ws)
	if r := td.do(t, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	waitFor(t, "the idle child to end", func() bool { return td.scrape(t)["acpguard_serve_children"] == 0 })
	if !pidGoneWithin(first, testTimeout(5*time.Second)) {
		t.Errorf("idle child %d still exists", first)
	}
	_, second := td.childOf(t, td.sessionIn(t, ws), ws)
	m := td.scrape(t)
	if second == first || m["acpguard_serve_children_started_total"] != 2 || m["acpguard_serve_children_died_total"] != 0 {
		t.Errorf("after the idle child %d ended: session in child %d, started %v, died %v; want a new child, 2, 0",
			first, second, m["acpguard_serve_children_started_total"], m["acpguard_serve_children_died_total"])
	}
}

// TestServeMaxChildrenFlag: an invalid --max-children stops serve with exit
// 2 and names the value and the range.
func TestServeMaxChildrenFlag(t *testing.T) {
	for _, raw := range []string{"0", "65", "-1", "two", ""} {
		code, _, stderr := runAcpguard(t, []string{"serve", "--workspace", t.TempDir(), "--max-children", raw})
		want := "acpguard: error: --max-children " + strconv.Quote(raw) + ": must be an integer from 1 through 64\n"
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("--max-children %q: exit %d, stderr %q; want %d and %q", raw, code, stderr, exitUsage, want)
		}
	}
	var caps capabilitiesBody
	td, _ := poolDaemon(t, 1, 0)
	if r := td.do(t, "GET", "/capabilities", ""); json.Unmarshal(r.body, &caps) != nil || caps.Limits.MaxChildren != defaultMaxChildren {
		t.Errorf("/capabilities = %s, want limits.maxChildren %d", r.body, defaultMaxChildren)
	}
}
