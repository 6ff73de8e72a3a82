// tools_fs_test.go checks the file tools and their confinement to the workspace.
package main

import (
	"context"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		mustWrite(t, filepath.Join(cwd, "a.txt"), "one\ntwo\nthree\n")
		mustWrite(t, filepath.Join(cwd, "bin"), "ab\x00cd")
		mustWrite(t, filepath.Join(cwd, "dir", "x"), "")
	}
	runToolCases(t, setup, []toolCase{
		{name: "whole", tool: "read_file", args: map[string]any{"file_path": "a.txt"}, status: statusCompleted, want: []string{"one\ntwo\nthree\n"}},
		{name: "offset and limit", tool: "read_file", args: map[string]any{"file_path": "a.txt", "offset": 1, "limit": 1}, status: statusCompleted,
			want: []string{"two\n", "showing lines 2-2 of 3"}, notWant: []string{"one", "three"}},
		{name: "missing", tool: "read_file", args: map[string]any{"file_path": "nope.txt"}, status: statusFailed, want: []string{"no such file"}},
		{name: "binary", tool: "read_file", args: map[string]any{"file_path": "bin"}, status: statusFailed, want: []string{"is binary"}},
		{name: "directory", tool: "read_file", args: map[string]any{"file_path": "dir"}, status: statusFailed, want: []string{"is a directory"}},
		{name: "offset past end", tool: "read_file", args: map[string]any{"file_path": "a.txt", "offset": 9}, status: statusFailed, want: []string{"past the end"}},
		// offset+limit would overflow int64 and slice past the end.
		{name: "largest limit", tool: "read_file", args: map[string]any{"file_path": "a.txt", "offset": 1, "limit": int64(math.MaxInt64)}, status: statusCompleted,
			want: []string{"two\nthree\n"}, notWant: []string{"one", "showing lines"}},
	})
}

// TestAbsolutePathInside uses a real absolute path, which the table cannot
// spell before the workspace exists.
func TestAbsolutePathInside(t *testing.T) {
	env, rec := newTestEnv(t, nil)
	p := filepath.Join(env.Cwd, "a.txt")
	mustWrite(t, p, "abc")
	res := runArgs(t, env, "read_file", map[string]any{"file_path": p})
	if res.Status != statusCompleted || res.Output != "abc" {
		t.Errorf("result = %+v", res)
	}
	if got := checkOnePending(t, rec); got.title != "Read "+p || got.kind != kindRead {
		t.Errorf("pending = %+v", got)
	}
}

func TestWriteFile(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		mustWrite(t, filepath.Join(cwd, "old.txt"), "old")
		mustWrite(t, filepath.Join(cwd, "long.txt"), "a longer old content")
		if err := os.Mkdir(filepath.Join(cwd, "adir"), 0o755); err != nil {
			t.Fatal(err)
		}
		// A symlink that stays inside the workspace may be written through.
		mustSymlink(t, filepath.Join(cwd, "old.txt"), filepath.Join(cwd, "link"))
	}
	runToolCases(t, setup, []toolCase{
		{name: "new nested", tool: "write_file", args: map[string]any{"file_path": "x/y/z.txt", "content": "hi"}, status: statusCompleted,
			want: []string{"Wrote 2 bytes to $CWD/x/y/z.txt"}, check: fileIs("x/y/z.txt", "hi")},
		{name: "overwrite", tool: "write_file", args: map[string]any{"file_path": "old.txt", "content": "new"}, status: statusCompleted, check: fileIs("old.txt", "new")},
		// The new content goes over the old, then the file is cut to it:
		// nothing of a longer old content is left behind.
		{name: "shorter over longer", tool: "write_file", args: map[string]any{"file_path": "long.txt", "content": "short"}, status: statusCompleted, check: fileIs("long.txt", "short")},
		{name: "empty over longer", tool: "write_file", args: map[string]any{"file_path": "long.txt", "content": ""}, status: statusCompleted, check: fileIs("long.txt", "")},
		{name: "through inside symlink", tool: "write_file", args: map[string]any{"file_path": "link", "content": "via"}, status: statusCompleted, check: fileIs("old.txt", "via")},
		{name: "directory", tool: "write_file", args: map[string]any{"file_path": "adir", "content": "x"}, status: statusFailed, want: []string{"is a directory"}},
	})
}

func TestEdit(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		mustWrite(t, filepath.Join(cwd, "f.txt"), "a b a c")
	}
	runToolCases(t, setup, []toolCase{
		{name: "once", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "b", "new_string": "B"}, status: statusCompleted,
			check: fileIs("f.txt", "a B a c")},
		{name: "ambiguous", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "a", "new_string": "A"}, status: statusFailed,
			want: []string{"occurs 2 times"}, check: fileIs("f.txt", "a b a c")},
		{name: "replace all", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "a", "new_string": "A", "replace_all": true}, status: statusCompleted,
			want: []string{"Replaced 2"}, check: fileIs("f.txt", "A b A c")},
		{name: "not found", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "zzz", "new_string": "y"}, status: statusFailed,
			want: []string{"not found"}, check: fileIs("f.txt", "a b a c")},
		{name: "identical", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "b", "new_string": "b"}, status: statusFailed,
			want: []string{"identical"}},
		{name: "create missing", tool: "edit", args: map[string]any{"file_path": "new/g.txt", "old_string": "", "new_string": "fresh"}, status: statusCompleted,
			check: fileIs("new/g.txt", "fresh")},
		{name: "create existing", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "", "new_string": "x"}, status: statusFailed,
			want: []string{"already exists"}, check: fileIs("f.txt", "a b a c")},
		{name: "missing file", tool: "edit", args: map[string]any{"file_path": "none.txt", "old_string": "a", "new_string": "b"}, status: statusFailed,
			want: []string{"no such file"}},
		{name: "alias replace", tool: "replace", args: map[string]any{"file_path": "f.txt", "old_string": "c", "new_string": "C"}, status: statusCompleted,
			check: fileIs("f.txt", "a b a C")},
	})
}

func TestListDirectory(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		mustWrite(t, filepath.Join(cwd, "b.txt"), "")
		mustWrite(t, filepath.Join(cwd, "zdir", "inner.txt"), "")
	}
	runToolCases(t, setup, []toolCase{
		{name: "root", tool: "list_directory", args: map[string]any{"path": "."}, status: statusCompleted,
			want: []string{"Directory listing for $CWD:\n[DIR] zdir\nb.txt\n"}, notWant: []string{"inner.txt"}},
		{name: "sub", tool: "list_directory", args: map[string]any{"path": "zdir"}, status: statusCompleted, want: []string{"inner.txt"}},
		{name: "missing", tool: "list_directory", args: map[string]any{"path": "nope"}, status: statusFailed, want: []string{"no such file"}},
	})
}

// TestPreviewChange: the change edit and write_file propose is computed
// through the workspace root without writing, is the change the executor
// then makes, and is absent when the call would fail or a side is too
// large to show.
func TestPreviewChange(t *testing.T) {
	big := strings.Repeat("x", maxDiffTextBytes+1)
	strp := func(s string) *string { return &s }
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		want    *fileDiff // nil: no diff, before or after
		status  string
		unmoved []string // files the preview must leave as they are
	}{
		{"edit", toolEdit, map[string]any{"file_path": "f.txt", "old_string": "b", "new_string": "B"},
			&fileDiff{Path: "f.txt", Old: strp("a b c"), New: "a B c"}, statusCompleted, nil},
		{"edit creates", toolEdit, map[string]any{"file_path": "new/g.txt", "old_string": "", "new_string": "fresh"},
			&fileDiff{Path: "new/g.txt", New: "fresh"}, statusCompleted, []string{"new"}},
		{"write new", toolWriteFile, map[string]any{"file_path": "n.txt", "content": "hi"},
			&fileDiff{Path: "n.txt", New: "hi"}, statusCompleted, []string{"n.txt"}},
		{"write over", toolWriteFile, map[string]any{"file_path": "f.txt", "content": "new"},
			&fileDiff{Path: "f.txt", Old: strp("a b c"), New: "new"}, statusCompleted, nil},
		{"edit not found", toolEdit, map[string]any{"file_path": "f.txt", "old_string": "zzz", "new_string": "y"}, nil, statusFailed, nil},
		{"edit missing file", toolEdit, map[string]any{"file_path": "none.txt", "old_string": "a", "new_string": "b"}, nil, statusFailed, []string{"none.txt"}},
		{"edit oversized file", toolEdit, map[string]any{"file_path": "big.txt", "old_string": "x", "new_string": "y", "replace_all": true}, nil, statusCompleted, nil},
		{"write oversized content", toolWriteFile, map[string]any{"file_path": "n.txt", "content": big}, nil, statusCompleted, []string{"n.txt"}},
		{"write over binary", toolWriteFile, map[string]any{"file_path": "bin", "content": "text"}, nil, statusCompleted, nil},
		{"write a directory", toolWriteFile, map[string]any{"file_path": "adir", "content": "x"}, nil, statusFailed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, rec := newTestEnv(t, nil)
			mustWrite(t, filepath.Join(env.Cwd, "f.txt"), "a b c")
			mustWrite(t, filepath.Join(env.Cwd, "big.txt"), big)
			mustWrite(t, filepath.Join(env.Cwd, "bin"), "a\x00b")
			if err := os.Mkdir(filepath.Join(env.Cwd, "adir"), 0o755); err != nil {
				t.Fatal(err)
			}
			args, err := normalizeFor(env, tt.tool, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			var want *fileDiff
			if tt.want != nil {
				w := *tt.want
				w.Path = filepath.Join(env.Cwd, w.Path)
				want = &w
			}
			before := snapshot(t, env.Cwd)
			got := previewChange(env, tt.tool, args)
			if after := snapshot(t, env.Cwd); !maps.Equal(before, after) {
				t.Errorf("the preview changed the workspace: %v -> %v", before, after)
			}
			for _, f := range tt.unmoved {
				if fileExists(filepath.Join(env.Cwd, f)) {
					t.Errorf("the preview created %s", f)
				}
			}
			checkDiff(t, "preview", got, want)
			res := runArgs(t, env, tt.tool, tt.args)
			if res.Status != tt.status {
				t.Fatalf("status = %q, want %q: %s", res.Status, tt.status, res.Output)
			}
			checkDiff(t, "result", res.Diff, want)
			checkOnePending(t, rec)
		})
	}
}

// TestPreviewFollowsNoMore: the preview reads nothing the executor would
// not, and a FIFO planted in the workspace does not stall it.
func TestPreviewFollowsNoMore(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	mustWrite(t, outside, "outside")
	// A directory symlink swapped in after normalization points outside.
	if err := os.Mkdir(filepath.Join(env.Cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	args, err := normalizeFor(env, toolEdit, map[string]any{"file_path": "sub/secret.txt", "old_string": "out", "new_string": "in"})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(env.Cwd, "sub"))
	mustSymlink(t, filepath.Dir(outside), filepath.Join(env.Cwd, "sub"))
	if d := previewChange(env, toolEdit, args); d != nil {
		t.Errorf("preview through a symlink out of the workspace = %+v", d)
	}
	fifo := filepath.Join(env.Cwd, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan *fileDiff, 1)
	go func() {
		done <- previewChange(env, toolWriteFile, map[string]any{"file_path": fifo, "content": "x"})
	}()
	select {
	case d := <-done:
		if d != nil {
			t.Errorf("preview of a FIFO = %+v", d)
		}
	case <-time.After(testTimeout(5 * time.Second)):
		t.Fatal("the preview blocked on a FIFO")
	}
}

func normalizeFor(env *toolEnv, tool string, args map[string]any) (map[string]any, error) {
	spec, _ := lookupTool(env, tool)
	return spec.normalize(env, maps.Clone(args))
}

// snapshot maps every path under dir to its content ("/" for a directory).
func snapshot(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		} else if err == nil {
			out[p] = d.Type().String()
		}
		return nil
	})
	return out
}

func checkDiff(t *testing.T, what string, got, want *fileDiff) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("%s diff = %+v, want %+v", what, got, want)
	}
	if got == nil {
		return
	}
	if got.Path != want.Path || got.New != want.New || (got.Old == nil) != (want.Old == nil) || got.Old != nil && *got.Old != *want.Old {
		t.Errorf("%s diff = %s %v %q, want %s %v %q", what, got.Path, derefOr(got.Old), got.New, want.Path, derefOr(want.Old), want.New)
	}
}

func derefOr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A FIFO planted in the workspace stalls no file tool: each call ends
// promptly, fails where it would read or write the FIFO, and leaves it a
// FIFO (DESIGN.md §1).
func TestFileToolsDoNotWaitOnFIFO(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	fifo := filepath.Join(env.Cwd, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool   string
		args   map[string]any
		status string
		want   string
	}{
		{toolReadFile, map[string]any{"file_path": fifo}, statusFailed, "is not a regular file"},
		{toolWriteFile, map[string]any{"file_path": fifo, "content": "x"}, statusFailed, "is not a regular file"},
		{toolEdit, map[string]any{"file_path": fifo, "old_string": "a", "new_string": "b"}, statusFailed, "is not a regular file"},
		{toolEdit, map[string]any{"file_path": fifo, "old_string": "", "new_string": "b"}, statusFailed, "is not a regular file"},
		{toolListDirectory, map[string]any{"path": fifo}, statusFailed, "not a directory"},
		{toolGrepSearch, map[string]any{"pattern": "x", "path": fifo}, statusCompleted, "No matches"},
		{toolGrepSearch, map[string]any{"pattern": "x"}, statusCompleted, "No matches"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			raw := jsonArgs(t, tc.args)
			done := make(chan toolResult, 1)
			go func() { done <- runTool(context.Background(), env, call(tc.tool, raw)) }()
			var res toolResult
			select {
			case res = <-done:
			case <-time.After(testTimeout(5 * time.Second)):
				// Open and close the other end so that a stalled open can end.
				if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
					f.Close()
				}
				t.Fatalf("%v did not return: it waits on a FIFO", tc.args)
			}
			if res.Status != tc.status || !strings.Contains(res.Output, tc.want) {
				t.Errorf("%v = %q %q, want %q containing %q", tc.args, res.Status, res.Output, tc.status, tc.want)
			}
			if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
				t.Errorf("the FIFO is now %v, %v", fi, err)
			}
		})
	}
}
