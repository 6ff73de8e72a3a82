// sandbox_hide.go owns the paths the sandbox keeps out of tools' reach
// although their directories are readable: acpguard's own secret files
// (the host token file, the provider token file, the model key file) and
// the operator's --sandbox-hide paths (DESIGN.md §5). Landlock only grants,
// so a read grant on a directory that holds a hidden path becomes, down the
// directories on the way to it, a grant on every other entry and a grant
// to list the directory itself.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// maxHideEntries bounds the entries of one directory on the way to a hidden
// path: each is opened and added as one Landlock rule when a session makes
// its ruleset, so a directory with more is refused rather than paid for.
const maxHideEntries = 4096

// realPathOf resolves the symbolic links of the longest existing part of
// the clean absolute path p and keeps the rest by name. Landlock sees real
// paths; a hidden path that does not exist yet stays hidden when it
// appears, since nothing grants its name.
func realPathOf(p string) string {
	rest := ""
	for dir := filepath.Clean(p); ; {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Clean(p)
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// realPaths resolves each path of ps with realPathOf, without repeats.
func realPaths(ps []string) []string {
	var out []string
	for _, p := range ps {
		if r := realPathOf(p); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// hiddenIn returns the first of the real hidden paths that lies in the
// directory dir (or is dir), "" when none does.
func hiddenIn(dir string, hide []string) string {
	real := realPathOf(dir)
	for _, h := range hide {
		if pathUnder(h, real) {
			return h
		}
	}
	return ""
}

// hiddenPaths are the real paths s hides, for the tools that read files in
// acpguard's own process, which Landlock does not confine (the search
// tools skip them); nil without a sandbox.
func (s *sandboxSession) hiddenPaths() []string {
	if s == nil {
		return nil
	}
	return realPaths(s.cfg.Hide)
}

// landlockAllowExcept grants access beneath path as landlockAllow does,
// except on the real paths hide and what lies beneath them. A path that is
// hidden, or lies in a hidden directory, gets nothing. A path that holds a
// hidden one gets, on itself and on each directory on the way, only the
// right to list it (llReadDir when access has it, which Landlock then
// allows beneath too: a hidden directory's names stay listable, never its
// files' contents), and access on each of their other entries. An entry
// made later in one of those directories gets nothing; a symbolic link
// among the entries gets nothing either, since Landlock checks the path a
// link leads to.
func landlockAllowExcept(ruleset int, path string, access uint64, hide []string) error {
	real := realPathOf(path)
	var beneath []string
	for _, h := range hide {
		switch {
		case pathUnder(real, h):
			return nil
		case pathUnder(h, real):
			beneath = append(beneath, h)
		}
	}
	if len(beneath) == 0 {
		return landlockAllow(ruleset, path, access)
	}
	fd, err := syscall.Open(real, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: open %q to keep %q out of reach: %w", real, beneath[0], err)
	}
	return allowAround(ruleset, fd, real, access, beneath)
}

// allowAround grants access on every entry of the directory dirfd (path
// dir, which it closes) but those that are hidden or lead to a hidden path,
// and walks down the latter; on dir itself only listing.
func allowAround(ruleset, dirfd int, dir string, access uint64, hide []string) error {
	f := os.NewFile(uintptr(dirfd), dir)
	defer f.Close()
	if access&llReadDir != 0 {
		if err := landlockAddRule(ruleset, dirfd, dir, llReadDir); err != nil {
			return err
		}
	}
	names, err := f.Readdirnames(maxHideEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("sandbox: list %q to keep %q out of reach: %w", dir, hide[0], err)
	}
	if len(names) > maxHideEntries {
		return hideWayError(dir, hide[0])
	}
	for _, name := range names {
		p := filepath.Join(dir, name)
		if slices.Contains(hide, p) {
			continue
		}
		var below []string
		for _, h := range hide {
			if pathUnder(h, p) {
				below = append(below, h)
			}
		}
		if err := allowEntry(ruleset, dirfd, name, p, access, below); err != nil {
			return err
		}
	}
	return nil
}

// allowEntry grants access on the entry name of the directory dirfd (path
// p), opened without following a link; below are the hidden paths beneath
// it, if it is a directory on their way.
func allowEntry(ruleset, dirfd int, name, p string, access uint64, below []string) error {
	flags := oPath | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	if len(below) > 0 {
		flags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	}
	fd, err := syscall.Openat(dirfd, name, flags, 0)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return nil // gone since the listing: nothing to grant
	case len(below) > 0 && (errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)):
		return nil // a file or a link where a directory was: the hidden path is not there
	case err != nil:
		return fmt.Errorf("sandbox: open %q for a Landlock rule: %w", p, err)
	}
	if len(below) > 0 {
		return allowAround(ruleset, fd, p, access, below)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("sandbox: stat %q: %w", p, err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return nil
	}
	return landlockAddRule(ruleset, fd, p, access)
}

// checkHidden refuses a configuration in which a hidden path cannot stay
// hidden or a list contradicts it: a hidden path in a writable directory
// (the cwd of a session, a --sandbox-write directory, a workspace), where
// tools could read or replace it; a --sandbox-read path that is hidden or
// lies in a hidden directory. writable are the directories sessions write
// in beyond c.Write, named by what to move in the error.
func (c sandboxConfig) checkHidden(writable ...string) error {
	if !c.on() || len(c.Hide) == 0 {
		return nil
	}
	hide := realPaths(c.Hide)
	for _, w := range c.Write {
		if h := hiddenIn(w, hide); h != "" {
			return usagef("--%s %q: holds the hidden %q, which tools could then read or replace; move the file out, or leave the directory out", flagSandboxWrite, w, h)
		}
	}
	for _, w := range writable {
		if h := hiddenIn(w, hide); h != "" {
			return usagef("workspace %q: holds the hidden %q, which tools could then read or replace; keep acpguard's token and key files and --%s paths out of every workspace", w, h, flagSandboxHide)
		}
	}
	for _, r := range c.Read {
		real := realPathOf(r)
		for _, h := range hide {
			if pathUnder(real, h) {
				return usagef("--%s %q: is hidden by %q; leave it out of one of the lists", flagSandboxRead, r, h)
			}
		}
	}
	return nil
}

// hideWayError says that the directory dir on the way to the hidden path h
// holds more entries than maxHideEntries.
func hideWayError(dir, h string) error {
	return fmt.Errorf("sandbox: %q holds more than %d entries on the way to the hidden %q, each a Landlock rule; keep secret files (--%s FILE, or $%s for a generated host token) and --%s paths in a smaller directory", dir, maxHideEntries, h, flagHostTokenFile, envRuntimeDir, flagSandboxHide)
}

// checkHideWays counts, once at start, the entries of every existing
// directory on the way to each hidden path, so that one with more than
// maxHideEntries stops the start instead of every session's first tool.
func (c sandboxConfig) checkHideWays() error {
	if !c.on() {
		return nil
	}
	for _, h := range realPaths(c.Hide) {
		for d := filepath.Dir(h); ; d = filepath.Dir(d) {
			if f, err := os.Open(d); err == nil {
				names, _ := f.Readdirnames(maxHideEntries + 1)
				f.Close()
				if len(names) > maxHideEntries {
					return hideWayError(d, h)
				}
			}
			if d == "/" {
				break
			}
		}
	}
	return nil
}
