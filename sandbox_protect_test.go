package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gitInit makes a repository with one commit in dir, unconfined.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	script := `set -e; git init -q -b main .; git config user.email t@example.invalid; git config user.name t
echo a > a.txt; git add a.txt; git commit -q -m first`
	if out, code := runShell(t, nil, dir, script); code != 0 {
		t.Fatalf("git init in %s: exit %d\n%s", dir, code, out)
	}
}

// TestSandboxProtectGit: a confined shell cannot write the hooks or the
// config of the workspace's repository, of a nested one or of a linked
// worktree's gitdir, nor move the way to them; git add and commit still
// work in the same session.
func TestSandboxProtectGit(t *testing.T) {
	requireLandlock(t)
	if err := mountStageWorks(); err != nil {
		t.Fatalf("the mount stage does not work here: %v", err)
	}
	ws := t.TempDir()
	gitInit(t, ws)
	nested := filepath.Join(ws, "sub", "nested")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	gitInit(t, nested)
	wt := filepath.Join(ws, "wt")
	if out, code := runShell(t, nil, ws, `git worktree add -q wt -b side`); code != 0 {
		t.Fatalf("git worktree add: %s", out)
	}
	sb := newTestSandbox(t, workspaceConfig(), ws)
	denied := []struct{ name, script, path string }{
		{"hook", `echo evil > .git/hooks/pre-commit`, ".git/hooks/pre-commit"},
		{"config", `echo '[core] hooksPath = /tmp' >> .git/config`, ".git/config"},
		{"nested hook", `echo evil > sub/nested/.git/hooks/pre-commit`, "sub/nested/.git/hooks/pre-commit"},
		{"nested config", `echo x >> sub/nested/.git/config`, "sub/nested/.git/config"},
		{"worktree pointer", `echo 'gitdir: /tmp' > wt/.git`, "wt/.git"},
		{"worktree's gitdir pointer", `echo /tmp > .git/worktrees/wt/commondir`, ".git/worktrees/wt/commondir"},
		{"hook through the worktree", `echo evil > "$(git -C wt rev-parse --git-common-dir)/hooks/pre-commit"`, ".git/hooks/pre-commit"},
		{"move the gitdir", `mv .git .git-old && mkdir .git`, ".git-old"},
		{"move the hooks", `mv .git/hooks .git/h2`, ".git/h2"},
		{"move the nested repository", `mv sub sub2`, "sub2"},
		{"git config", `git config core.fsmonitor evil`, ".git/config"},
	}
	for _, tt := range denied {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := os.ReadFile(filepath.Join(ws, tt.path))
			out, code := runShell(t, sb, ws, tt.script)
			after, _ := os.ReadFile(filepath.Join(ws, tt.path))
			t.Logf("confined %q: exit %d: %s", tt.script, code, strings.TrimSpace(out))
			if code == 0 || string(before) != string(after) {
				t.Errorf("confined %q: exit %d, %s changed (%q -> %q)\n%s", tt.script, code, tt.path, before, after, out)
			}
		})
	}
	// The repositories still work, in the worktree too: add, commit,
	// stash, checkout of a branch, merge.
	for _, dir := range []string{ws, nested, wt} {
		out, code := runShell(t, sb, dir, `set -e; b=$(git branch --show-current)
echo b >> a.txt; git add a.txt; git commit -q -m second
echo c >> a.txt; git stash -q; git stash pop -q; git commit -q -am third
git checkout -q -b topic-$b; echo d >> a.txt; git commit -q -am fourth
git checkout -q $b; git merge -q --ff-only topic-$b; git log --oneline | wc -l`)
		if code != 0 || strings.TrimSpace(out) != "4" {
			t.Errorf("confined git in %s: exit %d\n%s", dir, code, out)
		}
	}
}

// TestSandboxProtectHome: with the session cwd at $HOME, a confined shell
// cannot create or change the dot entries of the home directory, existing
// or not; the other entries stay writable.
func TestSandboxProtectHome(t *testing.T) {
	requireLandlock(t)
	home := t.TempDir()
	mustWrite(t, filepath.Join(home, ".bashrc"), "# mine\n")
	mustWrite(t, filepath.Join(home, ".qwen", "settings.json"), "{}\n")
	if err := os.Mkdir(filepath.Join(home, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(home, "proj", "state")
	mustWrite(t, filepath.Join(state, "s.json"), "{}")
	cfg := workspaceConfig()
	cfg.Trusted = trustedProtect(trustedSources{Home: home, StateDir: state, Settings: []settingsLayer{{scopeUser, filepath.Join(home, ".qwen", "settings.json")}}})
	sb := newTestSandbox(t, cfg, home)
	if rule := sb.protect.protectedRule(filepath.Join(state, "s.json")); rule != ruleStateDir {
		t.Errorf("the state directory's file is protected by %q, want %q", rule, ruleStateDir)
	}
	for _, script := range []string{
		`echo evil >> .bashrc`, `echo evil > .profile`, `echo '{"tools":{"sandbox":false}}' > .qwen/settings.json`,
		`mv .qwen .q2`, `rm -rf .qwen`, `echo x > .gitconfig`, `mkdir .ssh`,
		`echo x > proj/state/s.json`, `echo x > proj/state/new.json`, `mv proj/state proj/s2`, `mv proj p2`,
	} {
		out, code := runShell(t, sb, home, script)
		if code == 0 {
			t.Errorf("confined %q succeeded\n%s", script, out)
		}
	}
	if b := mustRead(t, filepath.Join(home, ".bashrc")); b != "# mine\n" {
		t.Errorf(".bashrc = %q", b)
	}
	if b := mustRead(t, filepath.Join(state, "s.json")); b != "{}" {
		t.Errorf("the state directory's file = %q", b)
	}
	for _, p := range []string{".profile", ".gitconfig", ".ssh", ".q2", "proj/state/new.json", "proj/s2", "p2"} {
		if !absent(t, filepath.Join(home, p)) {
			t.Errorf("%s was created", p)
		}
	}
	if out, code := runShell(t, sb, home, `set -e; echo ok > proj/file; cd proj; echo ok > other`); code != 0 {
		t.Errorf("writing in the home's other entries failed: %s", out)
	}
	_ = exec.Command
}

// protectedHome is a home directory with a shell profile, the user's
// settings and a project, for the sessions whose cwd is $HOME.
func protectedHome(t *testing.T) (home, outside string) {
	root := t.TempDir()
	home, outside = filepath.Join(root, "home"), filepath.Join(root, "outside")
	mustWrite(t, filepath.Join(home, ".bashrc"), "# mine\n")
	mustWrite(t, filepath.Join(home, ".qwen", "settings.json"), "{}\n")
	mustWrite(t, filepath.Join(home, "proj", "README"), "r\n")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	return home, outside
}

// homeAttacks are what a tool tries on the home directory's trusted files.
var homeAttacks = []string{
	shellCall(`echo '{"tools":{"sandbox":false}}' > .qwen/settings.json; echo evil >> .bashrc; echo x > .gitconfig; mkdir -p .qwen/x; echo $? > proj/shell.done`, false),
	`call write_file {"file_path":".qwen/settings.json","content":"{\"tools\":{\"sandbox\":false}}"}`,
	`call write_file {"file_path":".bashrc","content":"evil"}`,
	`call edit {"file_path":".bashrc","old_string":"# mine","new_string":"evil"}`,
	`call write_file {"file_path":".gitconfig","content":"[core]\n\thooksPath = /tmp"}`,
	`call write_file {"file_path":"proj/ok.txt","content":"ok"}`,
}

// checkHomeKept fails unless the home's trusted files are as they were and
// the project took its writes.
func checkHomeKept(t *testing.T, home, answers string) {
	t.Helper()
	if b := mustRead(t, filepath.Join(home, ".qwen", "settings.json")); b != "{}\n" {
		t.Errorf("~/.qwen/settings.json = %q", b)
	}
	if b := mustRead(t, filepath.Join(home, ".bashrc")); b != "# mine\n" {
		t.Errorf("~/.bashrc = %q", b)
	}
	for _, p := range []string{".gitconfig", ".qwen/x"} {
		if !absent(t, filepath.Join(home, p)) {
			t.Errorf("~/%s was created", p)
		}
	}
	if b := strings.TrimSpace(mustRead(t, filepath.Join(home, "proj", "shell.done"))); b == "0" {
		t.Error("the confined shell's writes to the home's dot entries succeeded")
	}
	if absent(t, filepath.Join(home, "proj", "ok.txt")) {
		t.Errorf("write_file in the project failed:\n%s", answers)
	}
	for _, want := range []string{
		fmt.Sprintf("write_file %q: protected path (trusted settings)", filepath.Join(home, ".qwen", "settings.json")),
		fmt.Sprintf("write_file %q: protected path (a dot entry of the home directory)", filepath.Join(home, ".bashrc")),
		fmt.Sprintf("edit %q: protected path (a dot entry of the home directory)", filepath.Join(home, ".bashrc")),
	} {
		if !strings.Contains(answers, want) {
			t.Errorf("answers lack %q:\n%s", want, answers)
		}
	}
}

// TestSandboxProtectACPHome: a standalone acp whose session cwd is $HOME:
// neither a confined shell nor write_file or edit can change the user's
// settings, shell profile or git config, and the next session is still
// confined.
func TestSandboxProtectACPHome(t *testing.T) {
	requireLandlock(t)
	home, outside := protectedHome(t)
	c := startACP(t, nil, nil, "HOME="+home, envTestSandbox+"="+sandboxWorkspace)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := c.newYoloSession(home)
	for _, p := range homeAttacks {
		c.prompt(sid, p, "")
	}
	var said []string
	for _, u := range c.sessionUpdates(sid) {
		said = append(said, u.Text)
	}
	checkHomeKept(t, home, strings.Join(said, "\n"))
	next := c.newYoloSession(home)
	c.prompt(next, shellCall(`echo x > `+filepath.Join(outside, "next.txt")+`; echo $? > proj/next.done`, false), "")
	if !absent(t, filepath.Join(outside, "next.txt")) || strings.TrimSpace(mustRead(t, filepath.Join(home, "proj", "next.done"))) == "0" {
		t.Error("the next session's shell wrote outside its workspace")
	}
}

// TestSandboxProtectServeHome: the same under serve --workspace $HOME.
func TestSandboxProtectServeHome(t *testing.T) {
	requireLandlock(t)
	home, outside := protectedHome(t)
	sp := startServe(t, []string{"--workspace", home, "--settings", yoloSettings(t)}, "HOME="+home, envTestSandbox+"="+sandboxWorkspace)
	id := sp.newSession(t, "")
	var answers []string
	for _, p := range homeAttacks {
		_, evs := sp.runTurn(t, id, p)
		for _, ev := range evs {
			answers = append(answers, jsonStrings(t, parseEnvelope(t, ev).Data)...)
		}
	}
	checkHomeKept(t, home, strings.Join(answers, "\n"))
	next := sp.newSession(t, "")
	sp.runTurn(t, next, shellCall(`echo x > `+filepath.Join(outside, "next.txt")+`; echo $? > proj/next.done`, false))
	if !absent(t, filepath.Join(outside, "next.txt")) || strings.TrimSpace(mustRead(t, filepath.Join(home, "proj", "next.done"))) == "0" {
		t.Error("the next session's shell wrote outside its workspace")
	}
}

// TestSandboxProtectRefused: where user namespaces are off, a session whose
// cwd holds a protected path is refused with the path and both fixes, and
// the reports say "refuse"; one elsewhere starts.
func TestSandboxProtectRefused(t *testing.T) {
	requireLandlock(t)
	home, _ := protectedHome(t)
	const wantErr = `lies in the writable`
	fixes := []string{"start the session in a directory that does not contain it", "enable unprivileged user namespaces"}

	// No settings files: a session elsewhere has nothing protected in reach.
	c := startACP(t, nil, []string{"--" + flagNoUserSettings}, "HOME="+home, envTestSandbox+"="+sandboxWorkspace, envTestUserNS+"=off")
	var init struct {
		AgentCapabilities struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"agentCapabilities"`
	}
	c.mustCall(methodInitialize, initializeParams(""), &init)
	if got := string(init.AgentCapabilities.Meta[metaSandbox]); !strings.Contains(got, `"protect":"refuse"`) {
		t.Errorf("initialize sandbox = %s, want protect refuse", got)
	}
	r := c.call(methodSessionNew, map[string]any{"cwd": home, "mcpServers": []any{}})
	if r.Error == nil || !strings.Contains(r.Error.Message, filepath.Join(home, ".")) || !strings.Contains(r.Error.Message, wantErr) {
		t.Fatalf("session/new in $HOME = %+v, want refused naming a path of the home", r)
	}
	for _, f := range fixes {
		if !strings.Contains(r.Error.Message, f) {
			t.Errorf("refusal %q lacks the fix %q", r.Error.Message, f)
		}
	}
	c.newSession(t.TempDir()) // nothing protected in reach: it starts

	sp := startServe(t, []string{"--workspace", home, "--settings", yoloSettings(t), "--sandbox", sandboxWorkspace}, "HOME="+home, envTestUserNS+"=off")
	var caps struct {
		Sandbox sandboxReport `json:"sandbox"`
	}
	if err := json.Unmarshal(sp.do(t, "GET", "/capabilities", "").body, &caps); err != nil || caps.Sandbox.Protect != protectRefuse {
		t.Errorf("capabilities sandbox = %+v (%v), want protect refuse", caps.Sandbox, err)
	}
	res := sp.do(t, "POST", "/session", threadScope(t, ""))
	if res.status == 200 || !strings.Contains(string(res.body), wantErr) {
		t.Errorf("POST /session in $HOME = %d %s, want refused", res.status, res.body)
	}
}

// jsonStrings is every string value in the JSON data, at any depth.
func jsonStrings(t *testing.T, data json.RawMessage) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// TestSandboxProtectUnreadable: a directory of the user's that the walk
// cannot list (a tool of an earlier session may have taken its modes away)
// refuses the session, since a repository beneath it would go unprotected;
// root lists it anyway and protects what is beneath.
func TestSandboxProtectUnreadable(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	hidden := filepath.Join(ws, "hidden")
	if err := os.Mkdir(hidden, 0o755); err != nil {
		t.Fatal(err)
	}
	gitInit(t, hidden)
	if err := os.Chmod(hidden, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(hidden, 0o755) })
	sb, err := newSandboxSession(workspaceConfig(), ws, sandboxTestEnv)
	if os.Geteuid() == 0 {
		if err != nil {
			t.Fatalf("root: newSandboxSession: %v", err)
		}
		defer sb.close()
		if rule := sb.protect.protectedRule(filepath.Join(hidden, ".git", "config")); rule != ruleGit || len(sb.protect.Mounts) == 0 {
			t.Errorf("root: the repository beneath the unreadable directory is not protected (rule %q, mounts %v)", rule, sb.protect.Mounts)
		}
		return
	}
	if err == nil {
		sb.close()
		t.Fatal("a session whose workspace holds a directory the walk cannot list started")
	}
	if want := fmt.Sprintf("list %q to find the git repositories to protect", hidden); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chmod u+rx") {
		t.Errorf("error = %v, want it to name %q and the fix", err, hidden)
	}
}

// TestSandboxStageTimeout: a stage that never answers is killed at the
// bound and the command's start fails naming it; nothing is left running.
func TestSandboxStageTimeout(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	gitInit(t, ws)
	sb := newTestSandbox(t, workspaceConfig(), ws)
	hang := filepath.Join(t.TempDir(), "hang")
	marker := filepath.Join(t.TempDir(), "pid")
	mustWrite(t, hang, "#!/bin/sh\necho $$ > "+marker+"\nexec sleep 600\n")
	if err := os.Chmod(hang, 0o755); err != nil {
		t.Fatal(err)
	}
	savedExe, savedTimeout := stageExecutable, stageTimeout
	stageExecutable, stageTimeout = hang, testTimeout(500*time.Millisecond)
	t.Cleanup(func() { stageExecutable, stageTimeout = savedExe, savedTimeout })
	cmd := exec.Command("true")
	cmd.Env = sandboxTestEnv.childEnv(sb.env()...)
	cmd.Dir = ws
	err := sb.start(cmd)
	if err == nil || !strings.Contains(err.Error(), "did not exec the command within") {
		t.Fatalf("start through a hung stage = %v, want the bound's error", err)
	}
	if pid := readPIDFile(t, marker); !processGone(pid) {
		t.Errorf("the hung stage %d is still running", pid)
	}
}

// TestSandboxProtectFIFOs: git files a tool made FIFOs (a repository's
// config, a worktree's commondir) do not hold a session's start.
func TestSandboxProtectFIFOs(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	for _, d := range []string{"r/.git/hooks", "g"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(ws, "wt", ".git"), "gitdir: ../g\n")
	for _, fifo := range []string{"r/.git/config", "g/commondir"} {
		if err := syscall.Mkfifo(filepath.Join(ws, fifo), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		sb, err := newSandboxSession(workspaceConfig(), ws, sandboxTestEnv)
		if err == nil {
			sb.close()
		}
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(testTimeout(30 * time.Second)):
		t.Fatal("planning the session's protection waits on a FIFO")
	}
}
