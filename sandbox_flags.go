// sandbox_flags.go owns the operator's sandbox input: the names of the
// --sandbox* flags of acp and serve and of the tools.sandbox* keys of the
// settings file, the rules every path they name must meet, the flags serve
// gives its children, and the rule that a workspace settings file may only
// narrow what the operator chose. config_sandbox.go makes one
// sandboxConfig of the flags, the keys and the guard mode's default;
// sandbox_report.go checks it against the kernel and says what is in force.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Flags of acp and serve.
const (
	flagSandbox      = "sandbox"
	flagSandboxRead  = "sandbox-read"
	flagSandboxWrite = "sandbox-write"
	flagSandboxHide  = "sandbox-hide"
	// flagSandboxProtect names a path no confined process and no built-in
	// file tool may change, even beneath a writable root (sandbox_protect.go).
	flagSandboxProtect = "sandbox-protect"
	// flagSandboxPrivate names a private file of acpguard's (a token or
	// key file): hidden whenever the sandbox is on,
	// whatever turned it on, and no mistake while it is off. serve gives
	// its own to each child.
	flagSandboxPrivate = "sandbox-private"
	// flagSandboxTemp names the directory each session's temp directory is
	// made in; serve gives each child one of its own.
	flagSandboxTemp    = "sandbox-temp"
	flagSandboxNetwork = "sandbox-network"
	flagSandboxUnix    = "sandbox-unix"
)

// Settings keys: Qwen Code's tools.sandbox, and acpguard's own lists beside
// it, named like Qwen Code's tools.sandboxImage and one for one like the
// flags.
const (
	keySandbox        = "tools.sandbox"
	keySandboxRead    = "tools.sandboxRead"
	keySandboxWrite   = "tools.sandboxWrite"
	keySandboxHide    = "tools.sandboxHide"
	keySandboxProtect = "tools.sandboxProtect"
	keySandboxNetwork = "tools.sandboxNetwork"
	keySandboxUnix    = "tools.sandboxUnix"
)

// maxSandboxPaths bounds each of the read and write lists: every path is
// opened and added as one Landlock rule at every process start a tool
// makes, so a long list is a cost paid on every command.
const maxSandboxPaths = 128

// sandboxSetting is tools.sandbox: Qwen Code's boolean (false off, true
// workspace) or the name of a container command ("docker", "podman",
// "sandbox-exec"), which acpguard refuses: it confines with Landlock and
// runs no container.
type sandboxSetting struct {
	set       bool
	on        bool
	container string // the string given, refused by validateSandbox
	isString  bool
}

func (s *sandboxSetting) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case bool:
		*s = sandboxSetting{set: true, on: v}
	case string:
		*s = sandboxSetting{set: true, container: v, isString: true}
	default:
		return fmt.Errorf("key %q: want a boolean", keySandbox)
	}
	return nil
}

// checkToken is the settings shape check (settings_schema.go): a boolean or a string.
func (sandboxSetting) checkToken(at string, tok json.Token) error {
	switch v := tok.(type) {
	case bool:
		return nil
	case string:
		return checkStringLen(at, v, maxSettingsStringBytes)
	}
	return shapeTypeError(at, "a boolean", jsonTokenKind(tok))
}

// sandboxAccess is tools.sandboxNetwork or tools.sandboxUnix: "all" or
// "none". Set tells a key given as "" from a key left out.
type sandboxAccess struct {
	set   bool
	value string
}

func (s *sandboxAccess) UnmarshalJSON(b []byte) error {
	s.set = true
	return json.Unmarshal(b, &s.value)
}

func (sandboxAccess) checkToken(at string, tok json.Token) error {
	v, ok := tok.(string)
	if !ok {
		return shapeTypeError(at, "a string", jsonTokenKind(tok))
	}
	return checkStringLen(at, v, maxSettingsStringBytes)
}

// validateSandbox checks the tools.sandbox* keys of a settings file and
// cleans their paths.
func (t *toolsSettings) validateSandbox() error {
	if t.Sandbox.isString {
		return fmt.Errorf("key %q: %q is a container sandbox, which acpguard does not run: acpguard confines tools with Landlock; set %s to true or pass --sandbox %s", keySandbox, t.Sandbox.container, keySandbox, sandboxWorkspace)
	}
	var err error
	if t.SandboxRead, err = sandboxPaths(t.SandboxRead, false, func(i int, v, rule string) error {
		return fmt.Errorf("key %q: %q %s", fmt.Sprintf("%s[%d]", keySandboxRead, i), v, rule)
	}); err != nil {
		return err
	}
	if t.SandboxRead != nil && len(t.SandboxRead) == 0 {
		return fmt.Errorf("key %q: an empty list leaves nothing to read or run; list the paths tools need, or leave the key out to read the whole filesystem", keySandboxRead)
	}
	if t.SandboxWrite, err = sandboxPaths(t.SandboxWrite, true, func(i int, v, rule string) error {
		return fmt.Errorf("key %q: %q %s", fmt.Sprintf("%s[%d]", keySandboxWrite, i), v, rule)
	}); err != nil {
		return err
	}
	if t.SandboxHide, err = hidePaths(t.SandboxHide, func(i int, v, rule string) error {
		return fmt.Errorf("key %q: %q %s", fmt.Sprintf("%s[%d]", keySandboxHide, i), v, rule)
	}); err != nil {
		return err
	}
	if t.SandboxProtect, err = protectPaths(t.SandboxProtect, func(i int, v, rule string) error {
		return fmt.Errorf("key %q: %q %s", fmt.Sprintf("%s[%d]", keySandboxProtect, i), v, rule)
	}); err != nil {
		return err
	}
	for _, k := range []struct {
		key string
		a   sandboxAccess
	}{{keySandboxNetwork, t.SandboxNetwork}, {keySandboxUnix, t.SandboxUnix}} {
		if k.a.set && k.a.value != sandboxAll && k.a.value != sandboxNone {
			return fmt.Errorf("key %q: %q: must be %q or %q", k.key, k.a.value, sandboxAll, sandboxNone)
		}
	}
	return nil
}

// sandboxPaths validates a read list (dirs false) or a write list (dirs
// true), returns it cleaned and without repeats, and reports the first bad
// entry through bad. A nil list stays nil: the key or flag was not given.
func sandboxPaths(raw []string, dirs bool, bad func(i int, v, rule string) error) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	if len(raw) > maxSandboxPaths {
		return nil, bad(maxSandboxPaths, raw[maxSandboxPaths], fmt.Sprintf("is one path too many: at most %d are allowed, each costs a Landlock rule at every process start", maxSandboxPaths))
	}
	out := make([]string, 0, len(raw))
	for i, p := range raw {
		if rule := sandboxPathRule(p, dirs); rule != "" {
			return nil, bad(i, p, rule)
		}
		if c := filepath.Clean(p); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// hidePaths validates the --sandbox-hide paths, cleaned and without
// repeats: absolute, without "." or "..", not "/"; they need not exist,
// since a hidden name stays hidden when it appears.
func hidePaths(raw []string, bad func(i int, v, rule string) error) ([]string, error) {
	return namedPaths(raw, "would hide the whole filesystem: list the paths tools need with --"+flagSandboxRead, bad)
}

// protectPaths validates the --sandbox-protect paths as hidePaths does the
// hidden ones: a protected name stays protected when it would appear.
func protectPaths(raw []string, bad func(i int, v, rule string) error) ([]string, error) {
	return namedPaths(raw, "would protect the whole filesystem: pass --"+flagSandbox+" "+sandboxWorkspace+" with no --"+flagSandboxWrite+" to keep tools to their session directory", bad)
}

// namedPaths validates a list of paths that need not exist: at most
// maxSandboxPaths, absolute, without "." or "..", not "/" (rootRule says
// why), cleaned and without repeats.
func namedPaths(raw []string, rootRule string, bad func(i int, v, rule string) error) ([]string, error) {
	if len(raw) > maxSandboxPaths {
		return nil, bad(maxSandboxPaths, raw[maxSandboxPaths], fmt.Sprintf("is one path too many: at most %d are allowed", maxSandboxPaths))
	}
	var out []string
	for i, p := range raw {
		rule := sandboxNameRule(p)
		if rule == "" && filepath.Clean(p) == "/" {
			rule = rootRule
		}
		if rule != "" {
			return nil, bad(i, p, rule)
		}
		if c := filepath.Clean(p); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// sandboxPathRule returns the rule a read path (dir false) or a writable
// directory (dir true) breaks, or "" when it is good: absolute, without "."
// or ".." (which could name another place than it seems once a link moves),
// existing, and for writing a directory other than "/".
func sandboxPathRule(p string, dir bool) string {
	if rule := sandboxNameRule(p); rule != "" {
		return rule
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) && dir:
		return "does not exist: create the directory first, or leave it out"
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist: list only paths that exist"
	case err != nil:
		return fmt.Sprintf("cannot be checked: %v", errors.Unwrap(err))
	case dir && !fi.IsDir():
		return "is not a directory: a writable path must be an existing directory"
	case dir && filepath.Clean(p) == "/":
		return "would make the whole filesystem writable: pass --sandbox off to leave writes unconfined"
	}
	return ""
}

// sandboxNameRule returns the rule the path p breaks as a name, or "":
// absolute, without "." or "..".
func sandboxNameRule(p string) string {
	switch {
	case p == "":
		return "must name a path"
	case strings.IndexByte(p, 0) >= 0:
		return "must not contain a NUL byte"
	case !filepath.IsAbs(p):
		if abs, err := filepath.Abs(p); err == nil {
			return fmt.Sprintf("must be an absolute path, such as %q", abs)
		}
		return "must be an absolute path"
	}
	for _, part := range strings.Split(p, "/") {
		if part == "." || part == ".." {
			return fmt.Sprintf("must not contain . or .. (write %q)", filepath.Clean(p))
		}
	}
	return ""
}

// sandboxGiven are the --sandbox* flags of serve's command line, already
// checked by resolve, as serve gives them to its children.
type sandboxGiven struct {
	profile, network, unix string // "" not given
	read, write            []string
	hide, protect          []string
	// secrets are serve's secret files, which every child hides from its
	// tools when its sandbox is on.
	secrets []string
}

// requiredModeSandbox is the sandbox of required mode when the operator
// chose nothing, for a serve assembled without flags (the demo).
func requiredModeSandbox() sandboxConfig {
	return sandboxConfig{Profile: sandboxWorkspace, Network: sandboxAll, Unix: sandboxAll}
}

// narrowSandbox applies the tools.sandbox* keys of a workspace settings
// file (a file the workspace's own users may write) to the operator's
// configuration op. Such a file may only narrow: turn the sandbox on, hide
// paths, take paths away from the read and write lists, deny the network
// or Unix sockets. What would widen (tools.sandbox false, a path outside the
// operator's lists, "all" where the operator said "none") is left out and
// named in dropped, for a warning. Paths are compared after resolving
// symbolic links, as Landlock opens them; the enforcement must still open
// them without following links that appear later.
func narrowSandbox(op sandboxConfig, ws toolsSettings) (c sandboxConfig, dropped []string) {
	c = op
	c.Read, c.Write, c.Hide, c.Protect = slices.Clone(op.Read), slices.Clone(op.Write), slices.Clone(op.Hide), slices.Clone(op.Protect)
	if ws.Sandbox.set {
		switch {
		case ws.Sandbox.on && !op.on():
			c = sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Network: sandboxAll, Unix: sandboxAll}
		case !ws.Sandbox.on && op.on():
			dropped = append(dropped, keySandbox+" false")
		}
	}
	if !c.on() {
		for key, set := range map[string]bool{keySandboxRead: ws.SandboxRead != nil, keySandboxWrite: ws.SandboxWrite != nil, keySandboxHide: ws.SandboxHide != nil, keySandboxProtect: ws.SandboxProtect != nil,
			keySandboxNetwork: ws.SandboxNetwork.set, keySandboxUnix: ws.SandboxUnix.set} {
			if set {
				dropped = append(dropped, key)
			}
		}
		slices.Sort(dropped)
		return c, dropped
	}
	if ws.SandboxRead != nil {
		if c.Read == nil {
			c.Read = []string{"/"}
		}
		var gone []string
		c.Read, gone = intersectPaths(c.Read, ws.SandboxRead)
		for _, p := range gone {
			dropped = append(dropped, keySandboxRead+" "+p)
		}
		c.Explicit = true
	}
	if ws.SandboxWrite != nil {
		var gone []string
		c.Write, gone = intersectPaths(c.Write, ws.SandboxWrite)
		for _, p := range gone {
			dropped = append(dropped, keySandboxWrite+" "+p)
		}
	}
	for _, p := range ws.SandboxHide {
		if !slices.Contains(c.Hide, p) {
			c.Hide = append(c.Hide, p)
		}
	}
	for _, p := range ws.SandboxProtect {
		if !slices.Contains(c.Protect, p) {
			c.Protect = append(c.Protect, p)
		}
	}
	if a := ws.SandboxNetwork; a.set {
		switch {
		case a.value == sandboxNone:
			c.Network, c.NetworkExplicit, c.Explicit = sandboxNone, true, true
		case c.Network == sandboxNone:
			dropped = append(dropped, keySandboxNetwork+" "+a.value)
		}
	}
	if a := ws.SandboxUnix; a.set {
		switch {
		case a.value == sandboxNone:
			c.Unix, c.Explicit = sandboxNone, true
		case c.Unix == sandboxNone:
			dropped = append(dropped, keySandboxUnix+" "+a.value)
		}
	}
	return c, dropped
}

// intersectPaths returns the paths both lists cover, each list meaning the
// union of the trees under its paths: a path of one list that lies under a
// path of the other. narrow's paths that cover nothing of base are gone.
func intersectPaths(base, narrow []string) (out, gone []string) {
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return ""
	}
	var bases []string
	for _, b := range base {
		if r := real(b); r != "" {
			bases = append(bases, r)
		}
	}
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, n := range narrow {
		r := real(n)
		kept := false
		for _, b := range bases {
			switch {
			case r == "":
			case pathUnder(r, b):
				add(r)
				kept = true
			case pathUnder(b, r):
				add(b)
				kept = true
			}
		}
		if !kept {
			gone = append(gone, n)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out, gone
}

// pathUnder reports whether p is dir or lies beneath it; both are clean
// absolute paths.
func pathUnder(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
