package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	// The repositories still work, in the worktree too.
	for _, dir := range []string{ws, nested, wt} {
		out, code := runShell(t, sb, dir, `set -e; echo b >> a.txt; git add a.txt; git commit -q -m second; git log --oneline | wc -l`)
		if code != 0 || strings.TrimSpace(out) != "2" {
			t.Errorf("confined git add and commit in %s: exit %d\n%s", dir, code, out)
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
	cfg := workspaceConfig()
	cfg.Trusted = trustedProtect(trustedSources{Home: home, Settings: []settingsLayer{{scopeUser, filepath.Join(home, ".qwen", "settings.json")}}})
	sb := newTestSandbox(t, cfg, home)
	for _, script := range []string{
		`echo evil >> .bashrc`, `echo evil > .profile`, `echo '{"tools":{"sandbox":false}}' > .qwen/settings.json`,
		`mv .qwen .q2`, `rm -rf .qwen`, `echo x > .gitconfig`, `mkdir .ssh`,
	} {
		out, code := runShell(t, sb, home, script)
		if code == 0 {
			t.Errorf("confined %q succeeded\n%s", script, out)
		}
	}
	if b := mustRead(t, filepath.Join(home, ".bashrc")); b != "# mine\n" {
		t.Errorf(".bashrc = %q", b)
	}
	for _, p := range []string{".profile", ".gitconfig", ".ssh", ".q2"} {
		if !absent(t, filepath.Join(home, p)) {
			t.Errorf("%s was created", p)
		}
	}
	if out, code := runShell(t, sb, home, `set -e; echo ok > proj/file; cd proj; echo ok > other`); code != 0 {
		t.Errorf("writing in the home's other entries failed: %s", out)
	}
	_ = exec.Command
}
