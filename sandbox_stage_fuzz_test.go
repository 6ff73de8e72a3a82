package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzStagePlan: the mount stage's decoder of the launcher's plan never
// panics, and what it accepts has only clean absolute mounts and encodes
// back to a plan it accepts again.
func FuzzStagePlan(f *testing.F) {
	for _, seed := range []string{
		`{"path":"/bin/true","args":["true"],"env":["A=b"],"dir":"/","mounts":[{"path":"/w/.git/hooks","readOnly":true}],"uid":1000,"gid":1000,"denyUnix":false,"denyNetwork":true}`,
		`{"path":"","mounts":[{"path":"/tmp/x","readOnly":true}]}`,
		`{"path":"/x","mounts":[{"path":"rel","readOnly":true}]}`,
		`{"path":"/x","unknown":1}`,
		`{"path":"/x"}{"path":"/y"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodeStagePlan(data)
		if err != nil {
			return
		}
		for _, m := range p.Mounts {
			if !filepath.IsAbs(m.Path) || filepath.Clean(m.Path) != m.Path {
				t.Fatalf("accepted mount %q", m.Path)
			}
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeStagePlan(again); err != nil {
			t.Fatalf("re-encoded plan %s refused: %v", again, err)
		}
	})
}

// FuzzGitPointer: a .git file, commondir or gitdir a tool wrote never
// panics the reader, and a path it returns is one line without a NUL.
func FuzzGitPointer(f *testing.F) {
	for _, seed := range []string{"gitdir: ../.git/worktrees/wt\n", "gitdir: /abs\r\n", "../..\n", "", "gitdir:\n", "\x00gitdir: x"} {
		f.Add([]byte(seed), "gitdir: ")
		f.Add([]byte(seed), "")
	}
	f.Fuzz(func(t *testing.T, data []byte, prefix string) {
		p, ok := parseGitPointer(data, prefix)
		if !ok {
			return
		}
		if p == "" || strings.ContainsAny(p, "\n") {
			t.Fatalf("parseGitPointer(%q, %q) = %q", data, prefix, p)
		}
	})
}
