// tools_test.go tests the built-in tools through runTool, on real files and
// real processes in a temporary workspace.
package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestToolDeclarations(t *testing.T) {
	for _, name := range builtinToolNames() {
		spec, ok := builtinTool(name)
		if !ok || spec.Name != name || spec.Kind == "" || spec.Description == "" {
			t.Errorf("builtin %q: %+v, %v", name, spec, ok)
			continue
		}
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(spec.parametersSchema(), &schema); err != nil || schema.Type != "object" || len(schema.Properties) != len(spec.Params) {
			t.Errorf("schema of %q: %s (%v)", name, spec.parametersSchema(), err)
		}
	}
	wantKinds := map[string]string{"read_file": "read", "write_file": "edit", "edit": "edit", "list_directory": "search",
		"glob": "search", "grep_search": "search", "run_shell_command": "execute"}
	for name, kind := range wantKinds {
		if spec, _ := builtinTool(name); spec.Kind != kind {
			t.Errorf("kind of %s = %q, want %q", name, spec.Kind, kind)
		}
	}
}

func TestIncompleteExtraToolNotRegistered(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	execs := 0
	spec := probeTool(&execs, false)
	spec.title = nil
	env.Extra = map[string]*toolSpec{"probe": spec}
	if res := runArgs(t, env, "probe", map[string]any{}); res.ErrorType != errTypeToolNotRegistered || execs != 0 {
		t.Errorf("result = %+v, executor calls %d", res, execs)
	}
}

// The path a call resolves to is the one full resolution through symlinks
// gives, whether the cwd's part is resolved once or again: for new and
// existing entries, under a symlinked cwd, through links inside and out.
func TestResolveWorkspacePathEqualsFullResolution(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(real, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(real, "f.txt"), filepath.Join(real, "sub", "g.txt"), filepath.Join(outside, "s.txt")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "link")
	for old, name := range map[string]string{real: link, outside: filepath.Join(real, "out"),
		filepath.Join(real, "sub"): filepath.Join(real, "in"), filepath.Join(real, "f.txt"): filepath.Join(real, "lf")} {
		if err := os.Symlink(old, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, cwd := range []string{real, link, real + "/", link + "/sub/.."} {
		// A session's workspace, its cwd resolved once, resolves alike.
		w, err := openWorkspace(cwd)
		if err != nil {
			t.Fatal(err)
		}
		session := &toolEnv{Cwd: cwd, Workspace: w}
		for _, p := range []string{".", "f.txt", "new.txt", "sub", "sub/g.txt", "sub/new/deep.txt", "in/g.txt", "in/new.txt",
			"lf", "out/s.txt", "out", "out/new.txt", "../outside/s.txt", filepath.Join(real, "f.txt"), filepath.Join(link, "new.txt")} {
			got, err := resolveWorkspacePath(cwd, p)
			want, wantErr := referenceResolve(cwd, p)
			if (err != nil) != (wantErr != nil) || got != want {
				t.Errorf("resolveWorkspacePath(%q, %q) = %q, %v; full resolution gives %q, %v", cwd, p, got, err, want, wantErr)
			}
			got, err = resolveInWorkspace(session, p)
			if (err != nil) != (wantErr != nil) || got != want {
				t.Errorf("in a session's workspace %q, %q resolves to %q, %v; full resolution gives %q, %v", cwd, p, got, err, want, wantErr)
			}
		}
		w.close()
	}
}

// referenceResolve resolves p against cwd by EvalSymlinks of the deepest
// existing ancestor, and refuses a result outside the resolved cwd.
func referenceResolve(cwd, p string) (string, error) {
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, abs)
	}
	abs = filepath.Clean(abs)
	realCwd, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(dir); err == nil {
			r, err := filepath.EvalSymlinks(dir)
			if err != nil {
				return "", err
			}
			r = filepath.Join(r, rest)
			if !withinDir(realCwd, r) {
				return "", errors.New("outside")
			}
			return r, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}
