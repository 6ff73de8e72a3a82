// provider_shell.go owns the policy's rules over parsed shell commands:
// the fields argv, argv0, options, assigns, redirects, reads, writes and
// complex of a run_shell_command rule, the simple commands a call is cut into
// (shell_parse.go), and how a rule meets each of them (DESIGN.md §8).
package main

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// shellToolName is the one tool whose rules may carry shell fields.
const shellToolName = "run_shell_command"

// providerShellRule is a rule's shell fields, compiled. A nil
// *providerShellRule is a rule without them.
type providerShellRule struct {
	argv      []string // prefix of the effective argv, argv[0] a basename; exact words or globs
	argv0     string   // glob on the basename of the command, its wrappers' included
	options   []string // the command carries one of them
	assigns   []string // globs on NAME of NAME=value prefixes
	redirects string   // "", redirectsAllow, redirectsDeny or redirectsNetwork
	reads     []string // absolute path globs on what redirections read
	writes    []string // absolute path globs on what redirections write
	complex   bool

	// Compiled once at load: decisions match them per simple command.
	argvM    []*shellGlob
	argv0M   *shellGlob
	optionsM *shellGlob
	letters  string // the single-letter options, matched inside clusters
	longs    []shellLongOption
	assignsM *shellGlob
	readsM   []*globMatcher
	writesM  []*globMatcher
}

// The values of a shell rule's "redirects": what a deny rule meets, or
// what an allow rule admits besides plain words.
const (
	redirectsAllow   = "allow"   // allow rules: redirections to any file
	redirectsDeny    = "deny"    // deny rules: a redirection to a file or a socket
	redirectsNetwork = "network" // deny rules: a redirection to a socket; allow rules: to any file or socket
)

// shellLongOption is a long option of a deny rule's "options", met in
// every spelling programs read as it (spellsLongOption).
type shellLongOption struct {
	name *shellGlob // the name after the dashes, a glob
	lit  string     // the name's literal part, before a glob character or "=": --P spells it for every non-empty prefix P
}

// longOptionOf reads an options alternative as a long option: "--" and a
// name, or "-" and a name of two letters or more (a single letter is a
// short option, matched in clusters), the name a glob that may hold
// "=value". ok is false for any other.
func longOptionOf(alt string) (name, lit string, ok bool) {
	_, name, double, isOption := splitLongOption(alt)
	lit = name
	if i := strings.IndexAny(lit, `*?[\=`); i >= 0 {
		lit = lit[:i]
	}
	return name, lit, isOption && lit != "" && (double || len(lit) >= 2)
}

// spells reports whether an option word spells the long option.
func (o shellLongOption) spells(w string) bool {
	return spellsLongOption(w, o.name.match, o.lit)
}

// shellGlob is a set of word globs with braces expanded: exact words in a
// map, the others as path.Match patterns with "/" made an ordinary byte.
type shellGlob struct {
	exact map[string]bool
	globs []string
}

func compileShellGlob(pats ...string) (*shellGlob, error) {
	g := &shellGlob{exact: map[string]bool{}}
	for _, p := range pats {
		alts, err := expandBraces(p)
		if err != nil {
			return nil, err
		}
		for _, a := range alts {
			if _, err := path.Match(a, ""); err != nil {
				return nil, err
			}
			if !strings.ContainsAny(a, `*?[\`) {
				g.exact[a] = true
				continue
			}
			g.globs = append(g.globs, strings.ReplaceAll(a, "/", "\x00"))
		}
	}
	return g, nil
}

func (g *shellGlob) match(word string) bool {
	if g.exact[word] {
		return true
	}
	if len(g.globs) == 0 {
		return false
	}
	if strings.IndexByte(word, '/') >= 0 {
		word = strings.ReplaceAll(word, "/", "\x00")
	}
	for _, p := range g.globs {
		if ok, _ := path.Match(p, word); ok {
			return true
		}
	}
	return false
}

// providerShellUnit is one simple command of a call as the rules see it:
// the effective command after its wrappers, and what stands around it.
type providerShellUnit struct {
	argv     []string // effective argv, argv[0] as written
	names    []string // basenames of argv[0] as written, of each wrapper and of the effective command
	wrappers []string // the wrappers in front, as basenames
	opaque   bool     // a wrapper in front is not transparent to allow rules
	assigns  []string // NAME=value words: the command's and its wrappers'
	toFile   bool     // output redirected to a file other than /dev/null
	network  bool     // a redirection opens a socket, or may (shellRedirect.network)
	// reads and writes are the paths the redirections read and write,
	// absolute and cleaned; "" for one not known before bash runs.
	reads, writes []string
	redirs        []shellRedirect
	ownRedirs     bool // redirs are the top-level command's own, not a script's inside it
	complex       bool
	why           string
	dynamic       bool // a word of argv is only known when bash runs
	control       bool // a word holds a control character (\r hides text on a terminal)
	notParse      bool // the command argument is not a string, or was not read whole
}

// providerShellCall is a run_shell_command call parsed once for all rules.
type providerShellCall struct {
	units   []providerShellUnit
	complex bool
	why     string
	err     error
	dropped bool // more simple commands than maxShellCommands: the rest were not kept
}

// transparentWrappers are the wrappers an allow rule sees through; any other
// (sudo, doas, su, time -o, busybox, ionice) makes the command opaque to
// allow rules, so that an allow on git never admits `sudo git`.
var transparentWrappers = map[string]bool{"command": true, "builtin": true, "exec": true, "nice": true, "nohup": true, "setsid": true, "timeout": true, "stdbuf": true, "xargs": true, "env": true}

func compileProviderShellRule(fr providerPolicyFileRule, allow bool, tool providerRuleTool) (*providerShellRule, error) {
	if fr.Argv == nil && fr.Argv0 == "" && fr.Options == nil && fr.Assigns == nil && fr.Redirects == "" && fr.Reads == nil && fr.Writes == nil && !fr.Complex {
		return nil, nil
	}
	if !tool.matches(fr.Tool, shellToolName) || tool.glob {
		return nil, fmt.Errorf("tool %q: argv, argv0, options, assigns, redirects, reads, writes and complex apply only to %q (or Bash, Shell)", fr.Tool, shellToolName)
	}
	s := &providerShellRule{argv: fr.Argv, argv0: fr.Argv0, options: fr.Options, assigns: fr.Assigns, reads: fr.Reads, writes: fr.Writes, complex: fr.Complex}
	if fr.Argv != nil && len(fr.Argv) == 0 {
		return nil, errors.New(`argv []: want at least one word, e.g. ["git", "log"]`)
	}
	if fr.Options != nil && len(fr.Options) == 0 {
		return nil, errors.New(`options []: want at least one option, e.g. ["--output*"]`)
	}
	if fr.Assigns != nil && len(fr.Assigns) == 0 {
		return nil, errors.New(`assigns []: want at least one name, e.g. ["GIT_*"]`)
	}
	for _, group := range []struct {
		field string
		pats  []string
	}{{"argv", fr.Argv}, {"argv0", []string{fr.Argv0}}, {"options", fr.Options}, {"assigns", fr.Assigns}} {
		for _, p := range group.pats {
			if p == "" && group.field == "argv0" {
				continue
			}
			if p == "" {
				return nil, fmt.Errorf("%s %q: an empty word matches nothing", group.field, p)
			}
			if _, err := shellWordMatch(p, ""); err != nil {
				return nil, fmt.Errorf("invalid %s pattern %q: %w", group.field, p, err)
			}
		}
	}
	for _, o := range fr.Options {
		if !strings.HasPrefix(o, "-") && !strings.HasPrefix(o, "+") {
			return nil, fmt.Errorf("options %q: an option starts with - (e.g. \"-r\", \"--output*\")", o)
		}
	}
	switch fr.Redirects {
	case "", redirectsNetwork:
	case redirectsAllow:
		if !allow {
			return nil, errors.New(`redirects "allow" on a deny rule: want "deny" or "network" there`)
		}
	case redirectsDeny:
		if allow {
			return nil, errors.New(`redirects "deny" on an allow rule: allow rules never match a redirection to a file unless they say "allow", nor to a socket unless they say "network"`)
		}
	default:
		return nil, fmt.Errorf(`redirects %q: want "deny" or "network" (deny rules), "allow" or "network" (allow rules)`, fr.Redirects)
	}
	s.redirects = fr.Redirects
	if allow && fr.Writes != nil && fr.Redirects != "" {
		return nil, fmt.Errorf(`writes with redirects %q: an allow rule's writes already admit the redirections to the files they name; drop one`, fr.Redirects)
	}
	for _, group := range []struct {
		field string
		pats  []string
		out   *[]*globMatcher
	}{{"reads", fr.Reads, &s.readsM}, {"writes", fr.Writes, &s.writesM}} {
		if group.pats != nil && len(group.pats) == 0 {
			return nil, fmt.Errorf(`%s []: want at least one path pattern, e.g. ["/srv/work/**"]`, group.field)
		}
		for _, p := range group.pats {
			m, err := compileAbsGlob(p)
			if err != nil {
				return nil, fmt.Errorf("invalid %s pattern %q: %w", group.field, p, err)
			}
			*group.out = append(*group.out, m)
		}
	}
	var err error
	for _, p := range fr.Argv {
		g, err := compileShellGlob(p)
		if err != nil {
			return nil, err
		}
		s.argvM = append(s.argvM, g)
	}
	if fr.Argv0 != "" {
		if s.argv0M, err = compileShellGlob(fr.Argv0); err != nil {
			return nil, err
		}
	}
	if s.optionsM, err = compileShellGlob(fr.Options...); err != nil {
		return nil, err
	}
	for _, o := range fr.Options {
		if len(o) == 2 && o[0] == '-' && o[1] != '-' && !strings.ContainsAny(o, `*?[\{`) {
			s.letters += o[1:]
		}
		if allow {
			continue // an allow rule takes the spelling it names, no other
		}
		alts, _ := expandBraces(o) // checked above
		for _, a := range alts {
			if name, lit, ok := longOptionOf(a); ok {
				g, err := compileShellGlob(name)
				if err != nil {
					return nil, err
				}
				s.longs = append(s.longs, shellLongOption{name: g, lit: lit})
			}
		}
	}
	if s.assignsM, err = compileShellGlob(fr.Assigns...); err != nil {
		return nil, err
	}
	return s, nil
}

// shellWordMatch matches one word against a glob of glob.go's engine
// ({a,b}, *, ?, [...], \ escapes), where * and ? match a slash too: a word
// is not a path.
func shellWordMatch(pattern, word string) (bool, error) {
	alts, err := expandBraces(pattern)
	if err != nil {
		return false, err
	}
	word = strings.ReplaceAll(word, "/", "\x00")
	for _, a := range alts {
		ok, err := path.Match(strings.ReplaceAll(a, "/", "\x00"), word)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// parseProviderShellCall cuts a call's command into the simple commands
// bash runs, each of them seen through its wrappers (expandWrappers): the
// commands of substitutions, subshells, sh -c scripts and find -exec too.
func parseProviderShellCall(args any) *providerShellCall {
	m, _ := args.(map[string]any)
	command, ok := m["command"].(string)
	if !ok {
		return &providerShellCall{complex: true, why: "the command is not a string",
			units: []providerShellUnit{{complex: true, why: "the command is not a string", notParse: true}}}
	}
	cmds, complex, err := parseShell(command)
	sc := &providerShellCall{complex: complex, err: err}
	for _, c := range cmds {
		if c.Complex && sc.why == "" {
			sc.why = c.Why
		}
		sc.addUnit(c, true)
		for _, inner := range expandWrappers(c) {
			sc.addUnit(inner, sameRedirects(inner.Redirects, c.Redirects))
		}
	}
	sc.resolvePaths(m["directory"])
	if complex && sc.why == "" {
		sc.why = "not plain words"
		if err != nil {
			sc.why = err.Error()
		}
	}
	if err != nil || sc.dropped {
		// Not all of the command was read (a syntax error, or past the
		// parser's bounds): what was not read may hold any command, so
		// every shell deny rule meets it and no allow rule does.
		why := "the command was not read whole"
		if err != nil {
			why += ": " + err.Error()
		}
		sc.units = append(sc.units, providerShellUnit{complex: true, why: why, notParse: true})
	}
	if complex {
		// A complex command as a whole: no part of it is plain words to an
		// allow rule, whatever the part.
		for i := range sc.units {
			if !sc.units[i].complex {
				sc.units[i].complex, sc.units[i].why = true, sc.why
			}
		}
	}
	return sc
}

// sameRedirects reports whether a command expandWrappers returned carries
// its top-level command's redirections, as the command a wrapper runs does
// (the same slice), rather than those of a script run inside it.
func sameRedirects(inner, outer []shellRedirect) bool {
	return len(inner) == 0 || len(inner) == len(outer) && &inner[0] == &outer[0]
}

func (sc *providerShellCall) addUnit(c shellCommand, own bool) {
	if len(c.Argv) == 0 && len(c.Redirects) == 0 && len(c.Assigns) == 0 {
		return
	}
	u := providerShellUnit{complex: c.Complex, why: c.Why}
	u.assigns = append(u.assigns, c.Assigns...)
	dyn := dynOf(c)
	argv, edyn, _ := stripWrappers(c.Argv, dyn)
	u.argv = argv
	for _, d := range edyn {
		u.dynamic = u.dynamic || d
	}
	if len(c.Argv) > 0 {
		u.names = append(u.names, path.Base(c.Argv[0]))
	}
	// The words in front of the effective command: wrappers, their options
	// and the assignments env and sudo take.
	front := c.Argv[:len(c.Argv)-len(argv)]
	for _, w := range front {
		name := path.Base(w)
		if _, isWrapper := shellWrappers[name]; isWrapper {
			u.names = append(u.names, name)
			u.wrappers = append(u.wrappers, name)
			if !transparentWrappers[name] {
				u.opaque = true
			}
		}
		if isAssignWord(w) {
			u.assigns = append(u.assigns, w)
		}
	}
	if len(front) > 0 && path.Base(front[0]) == "time" {
		u.opaque = true
	}
	if len(argv) > 0 {
		u.names = append(u.names, path.Base(argv[0]))
	}
	u.toFile = redirectsToFile(c.Redirects)
	u.redirs, u.ownRedirs = c.Redirects, own
	for _, r := range c.Redirects {
		u.network = u.network || r.network()
	}
	for _, w := range c.Argv {
		u.control = u.control || strings.IndexFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
	}
	if len(sc.units) < maxShellCommands {
		sc.units = append(sc.units, u)
	} else {
		sc.dropped = true
	}
}

// directoryChangers are the commands after which bash opens a relative
// redirection target somewhere other than the call's directory.
var directoryChangers = map[string]bool{"cd": true, "pushd": true, "popd": true}

// resolvePaths fills in each command's reads and writes: a target as
// written when absolute, else joined to the call's directory, cleaned. A
// target is not known ("") when it is dynamic, has a ".." segment (the
// kernel resolves it through symlinks, a lexical clean does not), or is
// relative and the call has no absolute directory, changes directory
// (cd, pushd, popd), or the target is a script's inside a wrapper (su -,
// env -C and find -execdir run it elsewhere).
func (sc *providerShellCall) resolvePaths(directory any) {
	dir, _ := directory.(string)
	if !path.IsAbs(dir) {
		dir = ""
	}
	for _, u := range sc.units {
		if len(u.argv) > 0 && directoryChangers[path.Base(u.argv[0])] {
			dir = ""
		}
	}
	for i := range sc.units {
		u := &sc.units[i]
		for _, r := range u.redirs {
			p := r.Target
			switch {
			case r.Dynamic || slices.Contains(strings.Split(p, "/"), ".."):
				p = ""
			case path.IsAbs(p):
				p = path.Clean(p)
			case dir != "" && u.ownRedirs:
				p = path.Join(dir, p)
			default:
				p = ""
			}
			if r.reads() {
				u.reads = append(u.reads, p)
			}
			if r.writes() {
				u.writes = append(u.writes, p)
			}
		}
	}
}

// matchUnit reports whether the rule's shell fields meet one simple
// command. A deny rule matches a command of any shape; an allow rule never
// matches a complex command without "complex": true, a command redirected
// to a socket without "redirects": "network", to a file without "allow",
// "network" or "writes" naming the file, one reading by a redirection a
// file its "reads" (when it has them) do not name, one with NAME=value
// prefixes its "assigns" do not all name, one behind a wrapper that is not
// transparent, one with a control character in a word, nor (without
// "complex": true) one whose words are only known when bash runs.
func (s *providerShellRule) matchUnit(allow bool, u *providerShellUnit) bool {
	if u.notParse {
		return !allow
	}
	if allow {
		if u.complex && !s.complex || u.opaque || u.control || u.dynamic && !s.complex {
			return false
		}
		if u.network && s.redirects != redirectsNetwork || !s.admitsWrites(u) || s.reads != nil && !allPaths(u.reads, s.readsM) {
			return false
		}
		for _, a := range u.assigns {
			name, _, _ := strings.Cut(a, "=")
			if !s.assignsM.match(name) {
				return false
			}
		}
	} else {
		if s.complex && !u.complex || s.redirects == redirectsDeny && !u.toFile && !u.network || s.redirects == redirectsNetwork && !u.network {
			return false
		}
		if s.reads != nil && !anyPath(u.reads, s.readsM) || s.writes != nil && !anyPath(u.writes, s.writesM) {
			return false
		}
		if s.assigns != nil && !u.anyAssign(s.assignsM) {
			return false
		}
	}
	if s.argv0 != "" && !s.matchArgv0(allow, u) {
		return false
	}
	if len(s.argv) > 0 {
		if len(u.argv) < len(s.argv) {
			return false
		}
		for i := range s.argv {
			w := u.argv[i]
			if i == 0 {
				w = path.Base(w)
			}
			if !s.argvM[i].match(w) {
				return false
			}
		}
	}
	if len(s.options) > 0 && !s.hasOption(u.argv) {
		return false
	}
	return true
}

// matchArgv0 matches argv0 against the effective command's basename and,
// for a deny rule, the basename of each wrapper in front of it too: a deny
// on sudo sees `nice sudo rm`.
func (s *providerShellRule) matchArgv0(allow bool, u *providerShellUnit) bool {
	if allow {
		return len(u.argv) > 0 && s.argv0M.match(path.Base(u.argv[0]))
	}
	for _, n := range u.names {
		if s.argv0M.match(n) {
			return true
		}
	}
	return false
}

// admitsWrites reports whether an allow rule admits the files a command
// writes by redirections: any with "redirects" "allow" or "network", those
// its "writes" name, none otherwise. /dev/null is no file.
func (s *providerShellRule) admitsWrites(u *providerShellUnit) bool {
	if !u.toFile || s.redirects == redirectsAllow || s.redirects == redirectsNetwork {
		return true
	}
	return s.writes != nil && allPaths(u.writes, s.writesM)
}

// anyPath reports whether a deny rule's patterns meet one of the paths; a
// path not known ("") meets them all.
func anyPath(paths []string, ms []*globMatcher) bool {
	for _, p := range paths {
		if p == "" {
			return true
		}
		for _, m := range ms {
			if m.matchAbs(p) {
				return true
			}
		}
	}
	return false
}

// allPaths reports whether an allow rule's patterns meet every one of the
// paths but /dev/null, which is no file; a path not known ("") meets none.
func allPaths(paths []string, ms []*globMatcher) bool {
	for _, p := range paths {
		if p == "" || p != "/dev/null" && !anyPath([]string{p}, ms) {
			return false
		}
	}
	return true
}

func (u *providerShellUnit) anyAssign(g *shellGlob) bool {
	for _, a := range u.assigns {
		name, _, _ := strings.Cut(a, "=")
		if g.match(name) {
			return true
		}
	}
	return false
}

// hasOption reports whether a word after argv[0] carries one of the rule's
// options: the word itself (--opt, or a glob such as --output*), its part
// before "=" (--opt=value), or for a single-letter option (-r) a cluster
// holding the letter (-rf); on a deny rule also a long option in any
// spelling getopt_long or Go's flag package reads as it (shellLongOption:
// --o, --op, ... for --opt; -opt for --opt and the reverse). Every word is
// looked at, even after "--": a deny must not be dodged by where a word
// stands.
func (s *providerShellRule) hasOption(argv []string) bool {
	for _, w := range argv[min(1, len(argv)):] {
		if len(w) < 2 || w[0] != '-' && w[0] != '+' {
			continue
		}
		name, _, hasEq := strings.Cut(w, "=")
		if s.optionsM.match(w) || hasEq && s.optionsM.match(name) {
			return true
		}
		if s.letters != "" && isOptionCluster(w) && strings.ContainsAny(w[1:], s.letters) {
			return true
		}
		for _, o := range s.longs {
			if o.spells(w) {
				return true
			}
		}
	}
	return false
}

// isOptionCluster reports whether w is -abc: single-letter options together.
func isOptionCluster(w string) bool {
	if len(w) < 2 || w[0] != '-' || w[1] == '-' {
		return false
	}
	for i := 1; i < len(w); i++ {
		c := w[i]
		if !isLetter(c) && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// describeShell renders the rule's shell fields for messages.
func (s *providerShellRule) describe() string {
	var parts []string
	if len(s.argv) > 0 {
		parts = append(parts, fmt.Sprintf("argv %q", s.argv))
	}
	if s.argv0 != "" {
		parts = append(parts, fmt.Sprintf("argv0 %q", s.argv0))
	}
	if len(s.options) > 0 {
		parts = append(parts, fmt.Sprintf("options %q", s.options))
	}
	if len(s.assigns) > 0 {
		parts = append(parts, fmt.Sprintf("assigns %q", s.assigns))
	}
	if s.redirects != "" {
		parts = append(parts, fmt.Sprintf("redirects %q", s.redirects))
	}
	if len(s.reads) > 0 {
		parts = append(parts, fmt.Sprintf("reads %q", s.reads))
	}
	if len(s.writes) > 0 {
		parts = append(parts, fmt.Sprintf("writes %q", s.writes))
	}
	if s.complex {
		parts = append(parts, "complex")
	}
	return strings.Join(parts, ", ")
}
