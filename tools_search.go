// tools_search.go owns the search tools glob and grep_search and the
// workspace walk they share.
package main

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// searchSkippedNote ends the text of a search that left paths out
// (walkFiles), so that the model knows the search saw less than the tree.
const searchSkippedNote = "[skipped %d path(s) denied by settings or hidden by the sandbox]"

// walkFiles calls fn for each regular file under the search root p (""
// for the session cwd) with the file's path as shown (under shown), its path
// relative to the search root with slashes, and the root its contents are
// read through; .git is skipped and symlinks are not followed. A path the
// rules refuse to read (env.ReadDenied) or the session's sandbox hides is
// left out, a directory with all it holds, and counted in skipped; so is
// the root itself. fn returns false to stop.
func walkFiles(ctx context.Context, env *toolEnv, p, shown string, fn func(abs, rel string, read func() ([]byte, error)) bool) (skipped int, err error) {
	hidden := env.Sandbox.hiddenPaths()
	checking := len(hidden) > 0 || env.ReadDenied != nil
	// The walk does not follow links, so a path under the resolved root is
	// the real path of what is read: the one the rules and the hidden
	// paths are compared with.
	base := p
	if base == "" && checking {
		if base, err = resolvedCwd(env); err != nil {
			return 0, err
		}
	}
	left := func(real string) bool {
		for _, h := range hidden {
			if pathUnder(real, h) {
				return true
			}
		}
		return env.ReadDenied != nil && env.ReadDenied(real)
	}
	root, start, release, err := workspaceRoot(env, p)
	if err != nil {
		return 0, err
	}
	defer release()
	start = filepath.ToSlash(start)
	err = fs.WalkDir(noWaitFS{root}, start, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == start {
				return err
			}
			return nil // an unreadable entry is skipped, not fatal
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() && d.Name() == ".git" && name != start {
			return fs.SkipDir
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil // a link, a FIFO, a device: neither followed nor read
		}
		under := "" // name below the root
		switch {
		case name == start:
		case start == ".":
			under = name
		default:
			under = strings.TrimPrefix(name, start+"/")
		}
		if checking && left(filepath.Join(base, filepath.FromSlash(under))) {
			skipped++
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, abs := under, filepath.Join(shown, filepath.FromSlash(under))
		if name == start {
			rel = d.Name() // the search root is a file: match it by its name
		}
		read := func() ([]byte, error) { return readTextFile(root, filepath.FromSlash(name), abs) }
		if !fn(abs, rel, read) {
			return fs.SkipAll
		}
		return nil
	})
	return skipped, err
}

func execGlob(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	m, err := compileGlob(argStr(args, "pattern"))
	if err != nil {
		return failed(errTypeInvalidParams, "glob: %v", err)
	}
	root := argDir(env, args, "path")
	var found []string
	truncated := false
	skipped, err := walkFiles(ctx, env, argStr(args, "path"), root, func(abs, rel string, _ func() ([]byte, error)) bool {
		if !m.match(rel) {
			return true
		}
		if len(found) == maxGlobResults {
			truncated = true
			return false
		}
		found = append(found, abs)
		return true
	})
	if err != nil {
		return failed(errTypeExecutionFailed, "glob: %v", err)
	}
	sort.Strings(found)
	out := &limitedBuffer{max: maxToolOutput}
	if len(found) == 0 {
		fmt.Fprintf(out, "No files found matching %q in %s", argStr(args, "pattern"), root)
	} else {
		fmt.Fprintf(out, "Found %d file(s) matching %q in %s:\n%s", len(found), argStr(args, "pattern"), root, strings.Join(found, "\n"))
	}
	if truncated {
		fmt.Fprintf(out, "\n[results limited to %d files]", maxGlobResults)
	}
	if skipped > 0 {
		fmt.Fprintf(out, "\n"+searchSkippedNote, skipped)
	}
	return completed(out.String(), map[string]any{"files": found, "truncated": truncated})
}

func execGrep(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	re, err := regexp.Compile(argStr(args, "pattern"))
	if err != nil {
		return failed(errTypeInvalidParams, "grep: %v", err)
	}
	var filter *globMatcher
	if g, ok := args["glob"].(string); ok {
		if filter, err = compileGlob(g); err != nil {
			return failed(errTypeInvalidParams, "grep: %v", err)
		}
	}
	limit := int(argInt(args, "limit", grepDefaultLimit))
	root := argDir(env, args, "path")
	out := &limitedBuffer{max: maxToolOutput}
	matches, truncated := 0, false
	skipped, err := walkFiles(ctx, env, argStr(args, "path"), root, func(abs, rel string, read func() ([]byte, error)) bool {
		if filter != nil {
			subject := rel
			if !strings.Contains(argStr(args, "glob"), "/") {
				subject = path.Base(rel) // a bare "*.go" filters by file name at any depth
			}
			if !filter.match(subject) {
				return true
			}
		}
		data, err := read()
		if err != nil {
			return true // binary, too large or unreadable: not searched
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if matches == limit {
				truncated = true
				return false
			}
			matches++
			if r := []rune(line); len(r) > maxGrepLineRunes {
				line = string(r[:maxGrepLineRunes]) + "..."
			}
			fmt.Fprintf(out, "%s:%d:%s\n", abs, i+1, line)
		}
		return true
	})
	if err != nil {
		return failed(errTypeExecutionFailed, "grep: %v", err)
	}
	note := ""
	if skipped > 0 {
		note = fmt.Sprintf(searchSkippedNote, skipped)
	}
	if matches == 0 {
		text := fmt.Sprintf("No matches for %q in %s", argStr(args, "pattern"), root)
		if note != "" {
			text += "\n" + note
		}
		return completed(text, map[string]any{"matches": 0})
	}
	text := out.String()
	if truncated {
		text += fmt.Sprintf("[results limited to %d matches]", limit)
		if note != "" {
			text += "\n"
		}
	}
	return completed(text+note, map[string]any{"matches": matches, "truncated": truncated})
}
