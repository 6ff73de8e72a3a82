// glob_test.go checks the glob engine: the glob tool's matcher and the
// segment matching of path permission rules.
package main

import (
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"**/*.go", "a.go", true},
		{"**/*.go", "a/b/c.go", true},
		{"a/**/c.go", "a/c.go", true},
		{"a/**/c.go", "a/x/y/c.go", true},
		{"a/**", "a/x/y", true},
		{"*.go", "a/b.go", false},
		{"a/*/c", "a/x/y/c", false},
		{"{a,b}/*.go", "b/x.go", true},
		{"x.{go,{ts,tsx}}", "x.tsx", true},
		{`\{a,b\}.go`, "{a,b}.go", true}, // escaped braces are literals, as in path rules
		{`\{a,b\}.go`, "a.go", false},
		{"**/**/**/**/**/**/**/**/z", strings.Repeat("a/", 40) + "y", false},
	}
	for _, tt := range tests {
		m, err := compileGlob(tt.pattern)
		if err != nil {
			t.Fatalf("compileGlob(%q): %v", tt.pattern, err)
		}
		if got := m.match(tt.path); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
	for _, bad := range []string{"", "/abs/*", "a/../b", "[", "{a,b", "a}", "{" + strings.Repeat("a,", 70) + "a}"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("compileGlob(%q) accepted", bad)
		}
	}
}

func FuzzGlob(f *testing.F) {
	f.Add("**/*.{go,ts}", "a/b/c.go")
	f.Add("a/**/b/**", "a/b")
	f.Add("{a,{b,c}}*", "bx")
	f.Fuzz(func(t *testing.T, pattern, p string) {
		m, err := compileGlob(pattern)
		if err != nil {
			return
		}
		m.match(p)
	})
}

func TestGlobSegmentsModes(t *testing.T) {
	seg := func(p string) []string { return pathSegments(p) }
	for _, tc := range []struct {
		pat, name      string
		full, any, all bool
	}{
		{"/a/**", "/a", true, true, true},
		{"/a/**", "/a/b/c", true, true, true},
		{"/a/*", "/a", false, true, false},
		{"/a/*", "/a/b", true, true, false},
		{"/a/**/x", "/a", false, true, false},
		{"/**/x/**", "/q/x", true, true, true},
		{"/b/**", "/a", false, false, false},
		{"/**", "/", true, true, true},
	} {
		if got := globSegments(seg(tc.pat), seg(tc.name), globFull); got != tc.full {
			t.Errorf("full %s %s: %v", tc.pat, tc.name, got)
		}
		if got := globSegments(seg(tc.pat), seg(tc.name), globAnyBelow); got != tc.any {
			t.Errorf("any %s %s: %v", tc.pat, tc.name, got)
		}
		if got := globSegments(seg(tc.pat), seg(tc.name), globAllBelow); got != tc.all {
			t.Errorf("all %s %s: %v", tc.pat, tc.name, got)
		}
	}
}
