// config_sandbox.go owns the sandbox flags of acp and serve: their flag
// set, their checks, made once at start, and how they, the tools.sandbox*
// keys of a settings file and the default of the guard mode make one
// sandboxConfig. sandbox_flags.go owns the names and the path rules the
// flags share with the settings keys, and the rule that a workspace
// settings file may only narrow what the operator chose;
// sandbox_report.go checks the result against the kernel and says what is
// in force.
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
	"flag"
	"fmt"
	"path/filepath"
	"slices"
)

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

// hideSecretFiles hides from tools each private file a flag names, whether
// it is read now or written at start (DESIGN.md §5).
func hideSecretFiles(f *sandboxFlags, files ...*onceValue) {
	for _, v := range files {
		if v.count > 0 && v.value != "" {
			f.addSecret(v.value)
		}
	}
}

// addSecret records the secret file path, made absolute, to be hidden.
func (f *sandboxFlags) addSecret(path string) {
	if abs, err := filepath.Abs(path); err == nil && !slices.Contains(f.secrets, abs) {
		f.secrets = append(f.secrets, abs)
	}
}

// sandboxChoice is the operator's sandbox flags, checked once at start:
// what the sandbox of the start and of each session is resolved from, over
// the settings that apply there.
type sandboxChoice struct {
	flags *sandboxFlags // as given, quoted by the errors of resolve
	paths sandboxFlagPaths
}

// check validates every sandbox flag, --sandbox as off or workspace
// first. Every error is a usage error.
func (f *sandboxFlags) check() (*sandboxChoice, error) {
	if f.profile.count > 0 && f.profile.value != sandboxOff && f.profile.value != sandboxWorkspace {
		return nil, usagef("--%s %q: must be %s or %s", flagSandbox, f.profile.value, sandboxOff, sandboxWorkspace)
	}
	p, err := f.validate()
	if err != nil {
		return nil, err
	}
	return &sandboxChoice{flags: f, paths: p}, nil
}

// resolve merges the checked flags over the settings st (read from
// settingsFile, "" for none) and the default of the guard mode:
// requiredDefault is true in required mode and in a managed child. Every
// error is a usage error.
func (s *sandboxChoice) resolve(st *settings, settingsFile string, requiredDefault bool) (sandboxConfig, error) {
	t, f := st.Tools, s.flags
	c, profileFlag := f.resolveProfile(t, requiredDefault)
	c.TempParent = s.paths.temp

	if c.Profile == sandboxOff {
		if err := f.checkOff(t, settingsFile, profileFlag); err != nil {
			return sandboxConfig{}, err
		}
		return sandboxConfig{Profile: sandboxOff, Explicit: c.Explicit, TempParent: c.TempParent}, nil
	}

	c = f.confine(c, t, s.paths)
	if err := c.checkHidden(); err != nil {
		return sandboxConfig{}, err
	}
	return c, nil
}

// forSessions returns how each session's sandbox is resolved: the same
// flags and mode default as the start's, over the settings of the
// session's own workspace (DESIGN.md §10), whose file loaded as trusted
// or with its sandbox keys dropped, as at the start. operatorFile names
// the --settings file in errors when no file set the key.
func (s *sandboxChoice) forSessions(operatorFile string, requiredDefault bool) func(*settingsLoad) (sandboxConfig, error) {
	return func(l *settingsLoad) (sandboxConfig, error) {
		return s.resolve(l.Settings, l.originOf("tools", operatorFile), requiredDefault)
	}
}

// given returns the flags the operator gave, and the secret files, as
// serve gives them to its children.
func (s *sandboxChoice) given() *sandboxGiven {
	f := s.flags
	return &sandboxGiven{profile: f.profile.value, network: f.network.value, unix: f.unix.value,
		read: slices.Clone(f.read), write: slices.Clone(f.write), hide: slices.Clone(f.hide), protect: slices.Clone(f.protect), secrets: slices.Clone(f.secrets)}
}

// resolveProfile is the sandbox's profile: --sandbox, else the settings'
// tools.sandbox t, else the default of the guard mode. profileFlag says
// --sandbox named it.
func (f *sandboxFlags) resolveProfile(t toolsSettings, requiredDefault bool) (c sandboxConfig, profileFlag bool) {
	profileFlag = f.profile.count > 0
	switch {
	case profileFlag:
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
	return c, profileFlag
}

// sandboxFlagPaths are what the sandbox flags name, validated: the path
// lists, the secret files and the parent of temporary directories.
type sandboxFlagPaths struct {
	read, write, hide, protect, secrets []string
	temp                                string
}

// validate checks every sandbox flag but --sandbox: each path as its list
// needs it, and --sandbox-network and --sandbox-unix as all or none.
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
	// p is checked once and shared by every session: each sandbox gets
	// lists of its own.
	c.Read, c.Write = t.SandboxRead, t.SandboxWrite
	if p.read != nil {
		c.Read = slices.Clone(p.read)
	}
	if p.write != nil {
		c.Write = slices.Clone(p.write)
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
	c.Private = slices.Clone(p.secrets)
	return c
}
