// tools_fs_test.go checks the file tools and their confinement to the workspace.
package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
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
