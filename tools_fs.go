// tools_fs.go owns the file tools: read_file, write_file, edit and
// list_directory, each confined to the workspace through os.Root, and the
// changes edit and write_file propose or made, shown to the client as diffs.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// workspace is a session's cwd resolved once, when the session opens: the
// resolved path, the directory held open as an os.Root, and that
// directory's identity. Every file tool of the session goes through it
// instead of resolving the cwd and opening a root per call (DESIGN.md §1).
// It is safe for concurrent use; the session closes it when it ends.
type workspace struct {
	cwd  string      // the session cwd as given, cleaned
	real string      // cwd resolved through symlinks at open
	root *os.Root    // the directory real named at open
	id   os.FileInfo // root's directory, for os.SameFile
}

// openWorkspace resolves cwd and opens it as a workspace.
func openWorkspace(cwd string) (*workspace, error) {
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return nil, fmt.Errorf("resolve session cwd %q: %w", cwd, err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open the workspace %q: %w", cwd, err)
	}
	id, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("open the workspace %q: %w", cwd, err)
	}
	return &workspace{cwd: filepath.Clean(cwd), real: real, root: root, id: id}, nil
}

// close releases the root; nil is a workspace never opened.
func (w *workspace) close() {
	if w != nil {
		w.root.Close()
	}
}

// current checks, with one stat, that the resolved cwd still names the
// directory the root holds. A workspace renamed away, or replaced by
// another directory or a symlink to one, fails every later call: the path
// the guard sees (the resolved cwd and the rest) must name the file the
// executor opens through the root.
func (w *workspace) current() error {
	if fi, err := os.Lstat(w.real); err != nil || !os.SameFile(fi, w.id) {
		return fmt.Errorf("workspace %q was moved or replaced since the session started; start a new session", w.cwd)
	}
	return nil
}

// sessionWorkspace is env's session workspace when it is the one of env's
// cwd and still current; nil, nil when env has none (a caller outside a
// session), which resolves per call.
func sessionWorkspace(env *toolEnv) (*workspace, error) {
	w := env.Workspace
	if w == nil || w.cwd != filepath.Clean(env.Cwd) {
		return nil, nil
	}
	if err := w.current(); err != nil {
		return nil, err
	}
	return w, nil
}

// resolvedCwd is env's cwd resolved through symlinks: the session's, checked
// current, or resolved now without one.
func resolvedCwd(env *toolEnv) (string, error) {
	w, err := sessionWorkspace(env)
	if err != nil {
		return "", err
	}
	if w != nil {
		return w.real, nil
	}
	real, err := filepath.EvalSymlinks(env.Cwd)
	if err != nil {
		return "", fmt.Errorf("resolve session cwd %q: %w", env.Cwd, err)
	}
	return real, nil
}

// workspaceRoot gives the root of the session cwd and p, a path
// resolveWorkspacePath returned ("" for the cwd itself), relative to it.
// Executors open files only through the root: a directory that a running
// process swapped for a symlink after the guard decided cannot lead outside
// the workspace. The root is the session's, or, without one, opened for
// this call; the caller calls release when done with it, and never closes
// the root itself.
func workspaceRoot(env *toolEnv, p string) (root *os.Root, rel string, release func(), err error) {
	w, err := sessionWorkspace(env)
	if err != nil {
		return nil, "", nil, err
	}
	release = func() {}
	if w == nil {
		if w, err = openWorkspace(env.Cwd); err != nil {
			return nil, "", nil, err
		}
		release = w.close
	}
	rel = "."
	if p != "" {
		if rel, err = filepath.Rel(w.real, p); err != nil || !withinDir(w.real, p) {
			release()
			return nil, "", nil, fmt.Errorf("path %q is outside the workspace %q", p, env.Cwd)
		}
	}
	return w.root, rel, release, nil
}

// openNoWait is os.O_NONBLOCK for the executors' opens (DESIGN.md §1): an
// open of a FIFO planted in the workspace returns at once (a read open) or
// fails (a write open without a reader) instead of waiting for the other
// end, which no cancel could interrupt. It changes nothing for a regular
// file or a directory, and spares the runtime setting and clearing the flag
// itself on every open.
const openNoWait = syscall.O_NONBLOCK

// readTextFile loads the file rel of root, shown as p, of at most
// maxReadFileBytes that is not binary. Only a regular file is read.
func readTextFile(root *os.Root, rel, p string) ([]byte, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|openNoWait, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%q is a directory", p)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxReadFileBytes {
		return nil, fmt.Errorf("file %q is larger than %d bytes", p, maxReadFileBytes)
	}
	if isBinary(data) {
		return nil, fmt.Errorf("file %q is binary", p)
	}
	return data, nil
}

func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0
}

func execReadFile(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	p := argStr(args, "file_path")
	root, rel, release, err := workspaceRoot(env, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "read file: %v", err)
	}
	defer release()
	data, err := readTextFile(root, rel, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "read file: %v", err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	offset := argInt(args, "offset", 0)
	limit := argInt(args, "limit", readDefaultLines)
	if offset > int64(len(lines)) {
		return failed(errTypeExecutionFailed, "read file: offset %d is past the end of %q (%d lines)", offset, p, len(lines))
	}
	// offset <= len(lines) here, so this cannot overflow as offset+limit can.
	end := offset + min(limit, int64(len(lines))-offset)
	out := &limitedBuffer{max: maxToolOutput}
	for _, l := range lines[offset:end] {
		out.WriteString(l)
	}
	text := out.String()
	if end < int64(len(lines)) {
		text += fmt.Sprintf("\n[showing lines %d-%d of %d; use offset and limit for more]", offset+1, end, len(lines))
	}
	return completed(text, map[string]any{"path": p, "lines": len(lines)})
}

func execWriteFile(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	p, content := argStr(args, "file_path"), argStr(args, "content")
	root, rel, release, err := workspaceRoot(env, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "write file: %v", err)
	}
	defer release()
	guard := protectGuard(env, "write_file", p)
	if err := guard(realPathOf(p)); err != nil {
		return failed(errTypeExecutionFailed, "%v", err)
	}
	// What the file held, for the diff the client is shown; read before the
	// write as the preview reads it.
	d := previewWrite(root, rel, p, content)
	if err := writeFile(root, rel, p, content, guard); err != nil {
		if errors.As(err, new(*protectedPathError)) {
			return failed(errTypeExecutionFailed, "%v", err)
		}
		return failed(errTypeExecutionFailed, "write file: %v", err)
	}
	res := completed(fmt.Sprintf("Wrote %d bytes to %s", len(content), p), fileResult(p, d, true, map[string]any{"path": p, "bytes": len(content)}))
	res.Diff = d
	return res
}

// writeFile writes content to the file rel of root, shown as p, creating
// the parent directories; an existing file keeps its mode. Only a regular
// file is written: the open does not wait on a FIFO (openNoWait), and
// anything else found open is left as it was. guard judges the real path
// of the file opened, before it is written: a directory swapped for a
// symbolic link after the first check cannot lead to a protected file.
func writeFile(root *os.Root, rel, p, content string, guard func(real string) error) error {
	if fi, err := root.Stat(rel); err == nil && fi.IsDir() {
		return fmt.Errorf("%q is a directory", p)
	} else if err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%q is not a regular file", p)
	}
	// The root itself is open: only a file below it has parents to make.
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|openNoWait, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%q is not a regular file", p)
		}
		return err
	}
	if real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err != nil || guard(real) != nil {
		f.Close()
		if err == nil {
			err = guard(real)
		}
		return err
	}
	// The content goes over the old from its start, then the file is cut
	// to the content's length: truncating a file to nothing first makes
	// ext4 free and reallocate its blocks, about ten times the cost of the
	// whole write when the length is about the same.
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Truncate(int64(len(content)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func execEdit(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	p := argStr(args, "file_path")
	root, rel, release, err := workspaceRoot(env, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "edit: %v", err)
	}
	defer release()
	guard := protectGuard(env, "edit", p)
	if err := guard(realPathOf(p)); err != nil {
		return failed(errTypeExecutionFailed, "%v", err)
	}
	data, err := readTextFile(root, rel, p)
	plan, res := planEdit(p, args, data, err)
	if plan == nil {
		return res
	}
	if err := writeFile(root, rel, p, plan.New, guard); err != nil {
		if errors.As(err, new(*protectedPathError)) {
			return failed(errTypeExecutionFailed, "%v", err)
		}
		return failed(errTypeExecutionFailed, "edit: %v", err)
	}
	d := plan.bounded()
	if plan.Old == nil {
		res = completed("Created "+p, fileResult(p, d, false, map[string]any{"path": p, "created": true}))
	} else {
		res = completed(fmt.Sprintf("Replaced %d occurrence(s) in %s", plan.replaced, p), fileResult(p, d, false, map[string]any{"path": p, "replacements": plan.replaced}))
	}
	res.Diff = d
	return res
}

// planEdit is the change edit makes to p, whose content is data (readErr
// from reading it), without writing: nil and the failure when the edit
// cannot be made. The executor and the preview share it, so a preview
// shows exactly what the executor would write.
func planEdit(p string, args map[string]any, data []byte, readErr error) (*fileDiff, toolResult) {
	oldS, newS := argStr(args, "old_string"), argStr(args, "new_string")
	switch {
	case errors.Is(readErr, fs.ErrNotExist) && oldS == "":
		return &fileDiff{Path: p, New: newS}, toolResult{}
	case readErr != nil:
		return nil, failed(errTypeExecutionFailed, "edit: %v", readErr)
	case oldS == "":
		return nil, failed(errTypeExecutionFailed, "edit: file %q already exists; an empty old_string only creates a new file", p)
	case oldS == newS:
		return nil, failed(errTypeExecutionFailed, "edit: old_string and new_string are identical; nothing to change in %q", p)
	}
	text := string(data)
	n := strings.Count(text, oldS)
	switch {
	case n == 0:
		return nil, failed(errTypeExecutionFailed, "edit: old_string not found in %q", p)
	case n > 1 && !argBool(args, "replace_all"):
		return nil, failed(errTypeExecutionFailed, "edit: old_string occurs %d times in %q; it must occur exactly once unless replace_all is true", n, p)
	}
	return &fileDiff{Path: p, Old: &text, New: strings.ReplaceAll(text, oldS, newS), replaced: n}, toolResult{}
}

// maxDiffTextBytes bounds each side of the diff an edit or a write shows
// the client (DESIGN.md §6): an editor renders both texts whole, and the
// update carrying them, escaped as JSON, must stay far below serve's
// maxChildLine with both sides full. Above it the client gets the text
// result only.
const maxDiffTextBytes = 256 << 10

// fileDiff is a change edit or write_file proposes or made: the ACP diff
// content of the call. Old is nil for a file that does not exist yet; the
// client is sent "" for it (oldText).
type fileDiff struct {
	Path     string // absolute, as normalized
	Old      *string
	New      string
	replaced int // occurrences an edit replaces
}

// bounded is d when both sides are within maxDiffTextBytes, else nil.
func (d *fileDiff) bounded() *fileDiff {
	if d == nil || len(d.New) > maxDiffTextBytes || d.Old != nil && len(*d.Old) > maxDiffTextBytes {
		return nil
	}
	return d
}

// previewChange is the change a prepared edit or write_file call (final
// arguments, DESIGN.md §1) would make, computed without writing anything,
// through the same workspace root as the executor: nil for other tools, a
// change above maxDiffTextBytes, or a call that would fail.
func previewChange(env *toolEnv, tool string, args map[string]any) *fileDiff {
	if env == nil || tool != toolEdit && tool != toolWriteFile {
		return nil
	}
	p := argStr(args, "file_path")
	root, rel, release, err := workspaceRoot(env, p)
	if err != nil {
		return nil
	}
	defer release()
	if tool == toolWriteFile {
		return previewWrite(root, rel, p, argStr(args, "content"))
	}
	old, err := readPreview(root, rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var data []byte
	if old != nil {
		data = []byte(*old)
	}
	plan, _ := planEdit(p, args, data, err)
	return plan.bounded()
}

// previewWrite is the change writing content to the file rel of root,
// shown as p, makes: nil when the current file cannot be shown.
func previewWrite(root *os.Root, rel, p, content string) *fileDiff {
	old, err := readPreview(root, rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return (&fileDiff{Path: p, Old: old, New: content}).bounded()
}

// errNoPreview marks a file a diff does not show: not a regular file, too
// large, or binary.
var errNoPreview = errors.New("no preview")

// readPreview reads the file rel of root for a diff: nil and an error
// wrapping fs.ErrNotExist when it does not exist. It opens without blocking
// (a FIFO planted in the workspace must not stall the call before the user
// is asked), reads only a regular file, and at most maxDiffTextBytes.
func readPreview(root *os.Root, rel string) (*string, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|openNoWait, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxDiffTextBytes {
		return nil, errNoPreview
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDiffTextBytes+1))
	if err != nil || len(data) > maxDiffTextBytes || isBinary(data) {
		return nil, errNoPreview
	}
	text := string(data)
	return &text, nil
}

func execListDirectory(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	p := argStr(args, "path")
	root, rel, release, err := workspaceRoot(env, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "list directory: %v", err)
	}
	defer release()
	entries, err := fs.ReadDir(noWaitFS{root}, filepath.ToSlash(rel))
	if err != nil {
		return failed(errTypeExecutionFailed, "list directory: %v", err)
	}
	// Directories first, each group by name, as Qwen Code lists them.
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].IsDir() && !entries[j].IsDir() })
	out := &limitedBuffer{max: maxToolOutput}
	fmt.Fprintf(out, "Directory listing for %s:\n", p)
	for _, e := range entries {
		if e.IsDir() {
			fmt.Fprintf(out, "[DIR] %s\n", e.Name())
		} else {
			fmt.Fprintf(out, "%s\n", e.Name())
		}
	}
	return completed(out.String(), map[string]any{"path": p, "entries": len(entries)})
}

// noWaitFS is root as an fs.FS for listing and walking the workspace whose
// opens do not wait on a FIFO (openNoWait): one swapped in for a directory
// between a listing and the next open fails that open's listing instead of
// stalling the call.
type noWaitFS struct{ root *os.Root }

func (n noWaitFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := n.root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|openNoWait, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (n noWaitFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return n.root.Stat(filepath.FromSlash(name))
}
