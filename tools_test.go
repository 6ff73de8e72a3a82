// tools_test.go tests the built-in tools through runTool, on real files and
// real processes in a temporary workspace.
package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sleepBriefly() { time.Sleep(10 * time.Millisecond) }

// runArgs runs one call with no guard and returns its result.
func runArgs(t *testing.T, env *toolEnv, name string, args map[string]any) toolResult {
	t.Helper()
	return runTool(context.Background(), env, call(name, jsonArgs(t, args)))
}

// toolCase is one call and what its result must look like.
type toolCase struct {
	name   string
	tool   string
	args   map[string]any
	status string
	// every string in want must occur in the output; none in notWant
	want, notWant []string
	// check, when set, inspects the workspace afterwards
	check func(t *testing.T, cwd string)
}

func runToolCases(t *testing.T, setup func(t *testing.T, cwd string), cases []toolCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := newTestEnv(t, nil)
			if setup != nil {
				setup(t, env.Cwd)
			}
			res := runArgs(t, env, tc.tool, tc.args)
			if res.Status != tc.status {
				t.Fatalf("status = %q, want %q; output %q", res.Status, tc.status, res.Output)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Output, strings.ReplaceAll(w, "$CWD", env.Cwd)) {
					t.Errorf("output %q does not contain %q", res.Output, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(res.Output, w) {
					t.Errorf("output %q contains %q", res.Output, w)
				}
			}
			if tc.check != nil {
				tc.check(t, env.Cwd)
			}
		})
	}
}

func fileIs(name, want string) func(t *testing.T, cwd string) {
	return func(t *testing.T, cwd string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(cwd, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
}

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
