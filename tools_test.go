// tools_test.go tests the built-in tools through runTool, on real files and
// real processes in a temporary workspace.
package main

import (
	"encoding/json"
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
