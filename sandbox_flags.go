// sandbox_flags.go owns turning the operator's sandbox input into one
// sandboxConfig: the --sandbox* flags of acp and serve, the tools.sandbox*
// keys of the settings file, which of them wins, the defaults of each guard
// mode, and the rule that a workspace settings file may only narrow what
// the operator chose. sandbox_report.go checks the result against the
// kernel and says what is in force.
//
// Precedence: an operator's flag wins over the same choice in the
// operator's settings file (--settings), which wins over the default. The
// default is workspace in required mode (and in a managed child, which
// serve starts only in required mode) and off in off mode, so off mode runs
// unconfined unless asked. --sandbox off given as a flag turns the sandbox off
// whatever the settings file says about it. The other options need the
// workspace profile: given while the profile is off they are refused, since
// a read list or a network ban that confines nothing is a mistake the
// operator should see.
package main

import (
	"encoding/json"
	"errors"
	"flag"
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

// sandboxFlags are the --sandbox* flags of a subcommand, not yet validated.
type sandboxFlags struct {
	profile, network, unix *onceValue
	temp                   *onceValue // --sandbox-temp
	read, write, hide      listValue
	protect                listValue
	// secrets are the absolute paths of the private files of this process,
	// or of the serve that started it (--sandbox-private): the files it
	// reads or writes a credential in. Hidden whenever the sandbox is on,
	// never a reason to refuse it off.
	secrets listValue
}

// addSandboxFlags registers the sandbox flags on fs.
func addSandboxFlags(fs *flag.FlagSet) *sandboxFlags {
	f := &sandboxFlags{
		profile: onceFlag(fs, flagSandbox, ""),
		network: onceFlag(fs, flagSandboxNetwork, ""),
		unix:    onceFlag(fs, flagSandboxUnix, ""),
		temp:    onceFlag(fs, flagSandboxTemp, ""),
	}
	fs.Var(&f.read, flagSandboxRead, "")
	fs.Var(&f.write, flagSandboxWrite, "")
	fs.Var(&f.hide, flagSandboxHide, "")
	fs.Var(&f.protect, flagSandboxProtect, "")
	fs.Var(&f.secrets, flagSandboxPrivate, "")
	return f
}

// resolve validates the flags and merges them over the settings st (read
// from settingsFile, "" for none) and the default of the guard mode:
// requiredDefault is true in required mode and in a managed child. Every
// error is a usage error.
func (f *sandboxFlags) resolve(st *settings, settingsFile string, requiredDefault bool) (sandboxConfig, error) {
	t := st.Tools
	c, profileFlag, err := f.resolveProfile(t, requiredDefault)
	if err != nil {
		return sandboxConfig{}, err
	}
	p, err := f.validate()
	if err != nil {
		return sandboxConfig{}, err
	}
	c.TempParent = p.temp

	if c.Profile == sandboxOff {
		if err := f.checkOff(t, settingsFile, profileFlag); err != nil {
			return sandboxConfig{}, err
		}
		return sandboxConfig{Profile: sandboxOff, Explicit: c.Explicit, TempParent: c.TempParent}, nil
	}

	c = f.confine(c, t, p)
	if err := c.checkHidden(); err != nil {
		return sandboxConfig{}, err
	}
	return c, nil
}

// resolveProfile is the sandbox's profile: --sandbox, else the settings'
// tools.sandbox t, else the default of the guard mode. profileFlag says
// --sandbox named it.
func (f *sandboxFlags) resolveProfile(t toolsSettings, requiredDefault bool) (c sandboxConfig, profileFlag bool, err error) {
	profileFlag = f.profile.count > 0
	switch {
	case profileFlag:
		if f.profile.value != sandboxOff && f.profile.value != sandboxWorkspace {
			return sandboxConfig{}, false, usagef("--%s %q: must be %s or %s", flagSandbox, f.profile.value, sandboxOff, sandboxWorkspace)
		}
		c.Profile, c.Explicit = f.profile.value, true
	case t.Sandbox.set:
		c.Profile, c.Explicit = sandboxOff, true
		if t.Sandbox.on {
			c.Profile = sandboxWorkspace
		}
	case requiredDefault:
		c.Profile = sandboxWorkspace
	default:
		c.Profile = sandboxOff
	}
	return c, profileFlag, nil
}

// sandboxFlagPaths are what the sandbox flags name, validated: the path
// lists, the secret files and the parent of temporary directories.
type sandboxFlagPaths struct {
	read, write, hide, protect, secrets []string
	temp                                string
}

// validate checks every sandbox flag but --sandbox on its own: each path
// as its list needs it, and --sandbox-network and --sandbox-unix as all or
// none.
func (f *sandboxFlags) validate() (sandboxFlagPaths, error) {
	var p sandboxFlagPaths
	var err error
	flagPath := func(name string) func(int, string, string) error {
		return func(_ int, v, rule string) error { return usagef("--%s %q: %s", name, v, rule) }
	}
	if p.read, err = sandboxPaths(f.read, false, flagPath(flagSandboxRead)); err != nil {
		return sandboxFlagPaths{}, err
	}
	if p.write, err = sandboxPaths(f.write, true, flagPath(flagSandboxWrite)); err != nil {
		return sandboxFlagPaths{}, err
	}
	if p.hide, err = hidePaths(f.hide, flagPath(flagSandboxHide)); err != nil {
		return sandboxFlagPaths{}, err
	}
	if p.protect, err = protectPaths(f.protect, flagPath(flagSandboxProtect)); err != nil {
		return sandboxFlagPaths{}, err
	}
	if p.secrets, err = hidePaths(f.secrets, flagPath(flagSandboxPrivate)); err != nil {
		return sandboxFlagPaths{}, err
	}
	if f.temp.count > 0 {
		if rule := sandboxPathRule(f.temp.value, true); rule != "" {
			return sandboxFlagPaths{}, usagef("--%s %q: %s", flagSandboxTemp, f.temp.value, rule)
		}
		p.temp = filepath.Clean(f.temp.value)
	}
	for _, v := range []*onceValue{f.network, f.unix} {
		if v.count > 0 && v.value != sandboxAll && v.value != sandboxNone {
			name := flagSandboxNetwork
			if v == f.unix {
				name = flagSandboxUnix
			}
			return sandboxFlagPaths{}, usagef("--%s %q: must be %s or %s", name, v.value, sandboxAll, sandboxNone)
		}
	}
	return p, nil
}

// checkOff refuses, for a sandbox that is off, the first flag and else
// the first key of the settings t (read from settingsFile) that would
// confine something, with the fix that fits where off came from:
// --sandbox (profileFlag, which wins over every key), tools.sandbox false
// or the default of the guard mode.
func (f *sandboxFlags) checkOff(t toolsSettings, settingsFile string, profileFlag bool) error {
	settingsErr := func(key, rule string) error {
		return usagef("settings %q: key %q: %s", settingsFile, key, rule)
	}
	// The first option that would be given to a sandbox that is off.
	type given struct{ flag, value string }
	var flags []given
	for _, p := range f.read {
		flags = append(flags, given{flagSandboxRead, p})
	}
	for _, p := range f.write {
		flags = append(flags, given{flagSandboxWrite, p})
	}
	for _, p := range f.hide {
		flags = append(flags, given{flagSandboxHide, p})
	}
	for _, p := range f.protect {
		flags = append(flags, given{flagSandboxProtect, p})
	}
	if f.network.count > 0 {
		flags = append(flags, given{flagSandboxNetwork, f.network.value})
	}
	if f.unix.count > 0 {
		flags = append(flags, given{flagSandboxUnix, f.unix.value})
	}
	var keys []string
	if t.SandboxRead != nil {
		keys = append(keys, keySandboxRead)
	}
	if t.SandboxWrite != nil {
		keys = append(keys, keySandboxWrite)
	}
	if t.SandboxHide != nil {
		keys = append(keys, keySandboxHide)
	}
	if t.SandboxProtect != nil {
		keys = append(keys, keySandboxProtect)
	}
	if t.SandboxNetwork.set {
		keys = append(keys, keySandboxNetwork)
	}
	if t.SandboxUnix.set {
		keys = append(keys, keySandboxUnix)
	}
	switch {
	case len(flags) > 0 && profileFlag:
		return usagef("--%s %q: confines nothing with --%s %s; drop it, or pass --%s %s", flags[0].flag, flags[0].value, flagSandbox, sandboxOff, flagSandbox, sandboxWorkspace)
	case len(flags) > 0 && t.Sandbox.set:
		return usagef("--%s %q: confines nothing with %s false in settings %q; drop it, or pass --%s %s", flags[0].flag, flags[0].value, keySandbox, settingsFile, flagSandbox, sandboxWorkspace)
	case len(flags) > 0:
		return usagef("--%s %q: confines nothing: the sandbox is off by default with --%s %s; add --%s %s", flags[0].flag, flags[0].value, flagGuardMode, guardModeOff, flagSandbox, sandboxWorkspace)
	case len(keys) > 0 && profileFlag:
		// "--sandbox off" wins over everything the settings say.
	case len(keys) > 0 && t.Sandbox.set:
		return settingsErr(keys[0], fmt.Sprintf("confines nothing with %s false; remove it, or set %s to true", keySandbox, keySandbox))
	case len(keys) > 0:
		return settingsErr(keys[0], fmt.Sprintf("confines nothing: the sandbox is off by default with --%s %s; set %s to true or pass --%s %s", flagGuardMode, guardModeOff, keySandbox, flagSandbox, sandboxWorkspace))
	}
	return nil
}

// confine merges the validated flags p over the settings t into c, a
// sandbox that is on: a flag's list or switch replaces the key's, hidden
// and protected paths add up, and an option that takes something away
// makes the sandbox explicit.
func (f *sandboxFlags) confine(c sandboxConfig, t toolsSettings, p sandboxFlagPaths) sandboxConfig {
	c.Read, c.Write = t.SandboxRead, t.SandboxWrite
	if p.read != nil {
		c.Read = p.read
	}
	if p.write != nil {
		c.Write = p.write
	}
	c.Network, c.Unix = sandboxAll, sandboxAll
	if t.SandboxNetwork.set {
		c.Network, c.NetworkExplicit = t.SandboxNetwork.value, true
	}
	if f.network.count > 0 {
		c.Network, c.NetworkExplicit = f.network.value, true
	}
	if t.SandboxUnix.set {
		c.Unix = t.SandboxUnix.value
	}
	if f.unix.count > 0 {
		c.Unix = f.unix.value
	}
	// An option that takes something away asks for confinement as plainly
	// as --sandbox workspace does: on a kernel without Landlock it must
	// not quietly start unconfined.
	if c.Read != nil || c.Network == sandboxNone || c.Unix == sandboxNone || p.hide != nil || t.SandboxHide != nil {
		c.Explicit = true
	}
	// Hidden paths add up, whoever names them: the settings' list, the
	// flags', the secret files.
	for _, h := range slices.Concat(t.SandboxHide, p.hide, p.secrets) {
		if !slices.Contains(c.Hide, h) {
			c.Hide = append(c.Hide, h)
		}
	}
	// Protected paths add up too; only the secret files are private.
	for _, pp := range slices.Concat(t.SandboxProtect, p.protect) {
		if !slices.Contains(c.Protect, pp) {
			c.Protect = append(c.Protect, pp)
		}
	}
	c.Private = p.secrets
	return c
}

// forSessions returns how each session's sandbox is resolved: the same
// flags and mode default as the start's, over the settings of the
// session's own workspace (DESIGN.md §10), whose file loaded as trusted
// or with its sandbox keys dropped, as at the start. operatorFile names
// the --settings file in errors when no file set the key.
func (f *sandboxFlags) forSessions(operatorFile string, requiredDefault bool) func(*settingsLoad) (sandboxConfig, error) {
	return func(l *settingsLoad) (sandboxConfig, error) {
		return f.resolve(l.Settings, l.originOf("tools", operatorFile), requiredDefault)
	}
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

// given returns the flags the operator gave, and the secret files.
func (f *sandboxFlags) given() *sandboxGiven {
	return &sandboxGiven{profile: f.profile.value, network: f.network.value, unix: f.unix.value,
		read: slices.Clone(f.read), write: slices.Clone(f.write), hide: slices.Clone(f.hide), protect: slices.Clone(f.protect), secrets: slices.Clone(f.secrets)}
}

// addSecret records the secret file path, made absolute, to be hidden.
func (f *sandboxFlags) addSecret(path string) {
	if abs, err := filepath.Abs(path); err == nil && !slices.Contains(f.secrets, abs) {
		f.secrets = append(f.secrets, abs)
	}
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

const sandboxFlagsUsage = `  --sandbox off|workspace
        confine every process a tool, a hook or an MCP server starts with the
        kernel's Landlock: writes only under the session cwd, its own temp
        directory and --sandbox-write directories; no access to acpguard's
        own processes; no capabilities. Default: workspace in required mode
        (off, with one warning, on a kernel without Landlock), off in off
        mode. workspace given explicitly on a kernel without Landlock exits 1.
  --sandbox-read PATH
        (repeatable) an existing absolute path confined processes may read
        and run; the list replaces the whole filesystem (the default).
  --sandbox-write DIR
        (repeatable) an existing absolute directory confined processes may
        also write beneath, such as a shared build cache.
  --sandbox-hide PATH
        (repeatable) an absolute path confined processes may not read or run,
        nor anything beneath it, though its directory is readable: ~/.ssh,
        a cloud credentials file. acpguard's own token and key files are
        always hidden. It must not lie in a workspace or a --sandbox-write
        directory, where Landlock cannot keep it out of reach.
  --sandbox-protect PATH
        (repeatable) an absolute path no confined process and no built-in
        file tool may create, change, rename or remove, even beneath a
        writable directory, existing or not; added to what acpguard always
        protects (its trusted settings, its state directory, the home
        directory's dot entries, every git repository's hooks and config).
  --sandbox-network all|none
        none refuses every socket but a Unix one (TCP, UDP, raw, packet,
        netlink) and io_uring; it needs Landlock ABI 4 (Linux 6.7) and exits
        1 on an older kernel (default all).
  --sandbox-unix all|none
        none refuses Unix sockets, so a tool cannot ask a user service manager
        or a terminal multiplexer to start an unconfined process (default all).
  --sandbox-private FILE
        (repeatable) a private file of acpguard's, hidden like a --sandbox-hide
        path whenever the sandbox is on, and no error while it is off; serve
        gives its children its token and key files this way.
  --sandbox-temp DIR
        the existing directory each session's temp directory is made in
        (default: the system's); serve gives each child one of its own and
        removes it once the child has exited.
`
