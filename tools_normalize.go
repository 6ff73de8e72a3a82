// tools_normalize.go owns the built-in tools' normalizers: what turns a
// call's type-checked arguments into its final ones, every default the
// executor would apply filled in and every path resolved inside the session
// workspace, before any layer decides (DESIGN.md §1). They run before the
// guard, which sees what they return, so they lie outside the trusted core.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

func argInt(args map[string]any, name string, def int64) int64 {
	if i, ok := args[name].(int64); ok {
		return i
	}
	return def
}

// argDir is the directory argument name, or the session cwd without one.
func argDir(env *toolEnv, args map[string]any, name string) string {
	if d := argStr(args, name); d != "" {
		return d
	}
	return filepath.Clean(env.Cwd)
}

func argBool(args map[string]any, name string) bool {
	b, _ := args[name].(bool)
	return b
}

// resolveWorkspacePath makes p absolute against cwd, cleans it, and rejects
// it when it leaves cwd, through a symlink too, before any permission or
// guard step. The deepest
// existing ancestor is resolved through symlinks and compared with the
// resolved cwd; that resolved path is what the guard sees and the tool uses.
// It resolves cwd itself; resolveInWorkspace takes a session's, resolved once.
func resolveWorkspacePath(cwd, p string) (string, error) {
	return resolveInWorkspace(&toolEnv{Cwd: cwd}, p)
}

// resolveInWorkspace is resolveWorkspacePath of p against env's cwd, through
// env's session workspace when it has one (resolvedCwd).
func resolveInWorkspace(env *toolEnv, p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	cwd := env.Cwd
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("session cwd %q is not absolute", cwd)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, abs)
	}
	abs = filepath.Clean(abs)
	realCwd, err := resolvedCwd(env)
	if err != nil {
		return "", err
	}
	real, err := resolveExisting(abs, filepath.Clean(cwd), realCwd)
	if err != nil {
		return "", err
	}
	if !withinDir(realCwd, real) {
		return "", fmt.Errorf("path %q is outside the workspace %q", p, cwd)
	}
	// The resolved path, not the spelling: the provider decides over the
	// file that will be opened, so a symlink inside the workspace
	// (docs -> secrets) cannot dodge a rule written for secrets/.
	return real, nil
}

// resolveExisting resolves the deepest existing ancestor of abs through
// symlinks and appends the components that do not exist yet. An existing
// entry that cannot be resolved (a dangling or looping symlink) is an error:
// writing through it could land anywhere. An ancestor that is cwd, just
// resolved to realCwd, is not resolved a second time, nor is the cwd part of
// an entry of cwd that is not a symlink.
func resolveExisting(abs, cwd, realCwd string) (string, error) {
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if dir == cwd {
			return filepath.Join(realCwd, rest), nil
		}
		if fi, err := os.Lstat(dir); err == nil {
			if fi.Mode()&fs.ModeSymlink == 0 && filepath.Dir(dir) == cwd {
				return filepath.Join(realCwd, filepath.Base(dir), rest), nil
			}
			real, err := filepath.EvalSymlinks(dir)
			if err != nil {
				return "", fmt.Errorf("resolve path %q: %w", abs, err)
			}
			return filepath.Join(real, rest), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("resolve path %q: %w", abs, err)
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("resolve path %q: no existing ancestor", abs)
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

func withinDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// normalizePathArgs returns a normalizer that resolves the named path
// arguments, when present, against the session cwd.
func normalizePathArgs(names ...string) func(env *toolEnv, args map[string]any) (map[string]any, error) {
	return func(env *toolEnv, args map[string]any) (map[string]any, error) {
		for _, name := range names {
			p, ok := args[name].(string)
			if !ok {
				continue
			}
			abs, err := resolveInWorkspace(env, p)
			if err != nil {
				return nil, fmt.Errorf("invalid argument %q: %w", name, err)
			}
			args[name] = abs
		}
		return args, nil
	}
}

// setDefault fills in an optional argument the model left out with the
// value its executor uses, so that the permission rules, the hooks and the
// guard all decide over the call that will run: a search without a path
// searches the session cwd, and a deny rule on that folder must see it.
// docs/policy-reference.md's table of built-in tools lists every default
// filled in.
func setDefault(args map[string]any, name string, v any) {
	if _, ok := args[name]; !ok {
		args[name] = v
	}
}

func normalizeReadFile(env *toolEnv, args map[string]any) (map[string]any, error) {
	if n, ok := args["offset"].(int64); ok && n < 0 {
		return nil, fmt.Errorf("invalid argument \"offset\": %d is negative", n)
	}
	if n, ok := args["limit"].(int64); ok && n < 1 {
		return nil, fmt.Errorf("invalid argument \"limit\": %d is not positive", n)
	}
	setDefault(args, "offset", int64(0))
	setDefault(args, "limit", int64(readDefaultLines))
	return normalizePathArgs("file_path")(env, args)
}

func normalizeWriteFile(env *toolEnv, args map[string]any) (map[string]any, error) {
	return normalizePathArgs("file_path")(env, args)
}

func normalizeListDirectory(env *toolEnv, args map[string]any) (map[string]any, error) {
	return normalizePathArgs("path")(env, args)
}

func normalizeEdit(env *toolEnv, args map[string]any) (map[string]any, error) {
	setDefault(args, "replace_all", false)
	return normalizePathArgs("file_path")(env, args)
}

func normalizeGlob(env *toolEnv, args map[string]any) (map[string]any, error) {
	if _, err := compileGlob(argStr(args, "pattern")); err != nil {
		return nil, fmt.Errorf("invalid argument \"pattern\": %w", err)
	}
	setDefault(args, "path", env.Cwd) // resolved below, as a given path is
	return normalizePathArgs("path")(env, args)
}

func normalizeGrep(env *toolEnv, args map[string]any) (map[string]any, error) {
	pat := argStr(args, "pattern")
	if len(pat) > maxPatternBytes {
		return nil, fmt.Errorf("invalid argument \"pattern\": longer than %d bytes", maxPatternBytes)
	}
	if _, err := regexp.Compile(pat); err != nil {
		return nil, fmt.Errorf("invalid argument \"pattern\": %w", err)
	}
	if g, ok := args["glob"].(string); ok {
		if _, err := compileGlob(g); err != nil {
			return nil, fmt.Errorf("invalid argument \"glob\": %w", err)
		}
	}
	if n, ok := args["limit"].(int64); ok && (n < 1 || n > grepMaxLimit) {
		return nil, fmt.Errorf("invalid argument \"limit\": %d is not between 1 and %d", n, grepMaxLimit)
	}
	setDefault(args, "path", env.Cwd)
	setDefault(args, "limit", int64(grepDefaultLimit))
	return normalizePathArgs("path")(env, args)
}

func normalizeShell(env *toolEnv, args map[string]any) (map[string]any, error) {
	if strings.TrimSpace(argStr(args, "command")) == "" {
		return nil, errors.New("invalid argument \"command\": command is empty")
	}
	if n, ok := args["timeout"].(int64); ok && (n < 1 || n > shellMaxTimeoutMS) {
		return nil, fmt.Errorf("invalid argument \"timeout\": %d ms is not between 1 and %d", n, shellMaxTimeoutMS)
	}
	setDefault(args, "is_background", false)
	if !argBool(args, "is_background") {
		// A background command has no timeout: none is filled in for it.
		setDefault(args, "timeout", int64(shellDefaultTimeoutMS))
	}
	setDefault(args, "directory", env.Cwd)
	return normalizePathArgs("directory")(env, args)
}
