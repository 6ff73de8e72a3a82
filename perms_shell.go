// perms_shell.go owns the shell side of Bash(...) permission rules: command
// patterns and the splitting of a command into the parts a rule must allow.
package main

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// compileCommandPattern turns a shell specifier into an anchored regexp with
// Qwen Code's semantics: a lone "*" matches any command; without "*" the
// pattern is a prefix ending at a word boundary ("git commit" matches "git
// commit -m x", not "git commitx"); " *" matches the rest of the words or
// nothing ("ls *" matches "ls" and "ls -la" but not "lsof"); any other "*"
// matches any text. The legacy form "git:*" means "git *".
func compileCommandPattern(spec string) (*regexp.Regexp, error) {
	if strings.HasSuffix(spec, ":*") {
		spec = strings.TrimSuffix(spec, ":*") + " *"
	}
	spec = collapseBlanks(strings.TrimSpace(spec))
	var b strings.Builder
	b.WriteString(`(?s)^`)
	switch {
	case spec == "*":
		b.WriteString(`.*`)
	case !strings.Contains(spec, "*"):
		b.WriteString(regexp.QuoteMeta(spec) + `(?: .*)?`)
	default:
		parts := strings.Split(spec, "*")
		for i, lit := range parts {
			if i == len(parts)-1 {
				b.WriteString(regexp.QuoteMeta(lit))
				break
			}
			if strings.HasSuffix(lit, " ") {
				b.WriteString(regexp.QuoteMeta(strings.TrimSuffix(lit, " ")) + `(?: .*)?`)
			} else {
				b.WriteString(regexp.QuoteMeta(lit) + `.*`)
			}
		}
	}
	b.WriteString(`$`)
	return regexp.Compile(b.String())
}

// collapseBlanks replaces each run of spaces and tabs with one space, so
// that "rm\t-rf" cannot slip past a rule written as "rm *".
func collapseBlanks(s string) string {
	var b strings.Builder
	blank := false
	for _, c := range s {
		if c == ' ' || c == '\t' {
			blank = true
			continue
		}
		if blank && b.Len() > 0 {
			b.WriteByte(' ')
		}
		blank = false
		b.WriteRune(c)
	}
	return b.String()
}

// matchShellParts is how a deny or ask rule meets a command: it matches
// when any form of any simple command does (shellView.deny).
func matchShellParts(re *regexp.Regexp, parts []string) bool {
	for _, p := range parts {
		if re.MatchString(p) {
			return true
		}
	}
	return false
}

// allowShellParts is how allow rules with a command pattern meet a command:
// as in Qwen Code, a compound command is allowed only if every simple
// command is, each by some rule; here also every command it runs through
// a wrapper (sudo rm x needs both "sudo rm x" and "rm x" allowed). A
// complex command is never allowed by a pattern. It returns the rules used,
// joined by ", ", or "".
func (r *permissionRules) allowShellParts(c permCall) string {
	if c.tool != toolShell || !c.hasCommand || c.complex || len(c.allow) == 0 {
		return ""
	}
	var used []string
	for _, forms := range c.allow {
		if forms == nil {
			return ""
		}
		for _, p := range forms {
			found := ""
			for _, rl := range r.allow {
				if rl.command != nil && rl.command.MatchString(p) {
					found = rl.raw
					break
				}
			}
			if found == "" {
				return ""
			}
			if !slices.Contains(used, found) {
				used = append(used, found)
			}
		}
	}
	return strings.Join(used, ", ")
}

// shellView is a shell command as the permission rules see it, parsed by
// parseShell (shell_parse.go).
type shellView struct {
	// deny holds every form of every simple command a deny or ask rule is
	// matched against: as written (argv0 as written and as a basename, with
	// and without its assignments), and each command run through a wrapper
	// or a find -exec, su -c or sh -c (expandWrappers).
	deny []string
	// denyForms are the words of each form of deny, for the rules that
	// meet long options in every spelling (matchOptionSpellings).
	denyForms []shellForm
	// allow holds, per simple command, the forms that must each match an
	// allow rule; nil for a command no rule may allow (complex, or writing
	// a file by a redirection).
	allow [][]string
	// complex: the command cannot be reduced to plain words.
	complex bool
	// network: a redirection of some simple command opens a socket, or
	// may (shellRedirect.network): no rule or mode allows the command.
	network bool
	// unread: the parser stopped before the end (a syntax error, or past
	// its bounds); what it did not read may hold any command, so every
	// deny and ask rule with a command pattern meets the call.
	unread bool
}

// viewShellCommand parses command for the permission rules.
func viewShellCommand(command string) shellView {
	cmds, complex, err := parseShell(command)
	v := shellView{complex: complex, unread: err != nil}
	seen := map[string]bool{}
	addDeny := func(assigns, argv []string, base bool) {
		f := shellForm{assigns: assigns, argv: slices.Clone(argv)}
		if base && len(argv) > 0 {
			f.argv[0] = path.Base(argv[0])
		}
		if s := argvText(assigns, argv, base); !seen[s] {
			seen[s] = true
			v.deny = append(v.deny, s)
			v.denyForms = append(v.denyForms, f)
		}
		// A word holding a blank is quoted in the text above, which a
		// pattern such as "make --eval*" would not meet for
		// make --eval='a b': deny and ask rules see the words joined
		// as they are too.
		if s := f.plainText(); !seen[s] {
			seen[s] = true
			v.deny = append(v.deny, s)
		}
	}
	for _, c := range cmds {
		var forms []string
		allowable := !c.Complex && !redirectsToFile(c.Redirects)
		for k, x := range append([]shellCommand{c}, expandWrappers(c)...) {
			for _, r := range x.Redirects {
				v.network = v.network || r.network()
			}
			addDeny(nil, x.Argv, false)
			addDeny(nil, x.Argv, true)
			if len(x.Assigns) > 0 {
				addDeny(x.Assigns, x.Argv, true)
			}
			forms = append(forms, argvText(x.Assigns, x.Argv, true))
			if k > 0 && x.Complex {
				allowable = false
			}
		}
		if !allowable {
			forms = nil
		}
		v.allow = append(v.allow, forms)
	}
	return v
}

// shellForm is one form of a simple command for the deny and ask rules:
// its assignments and its words, argv0 as the form spells it.
type shellForm struct {
	assigns, argv []string
}

// plainText is the form's words joined by one space, none quoted.
func (f shellForm) plainText() string {
	return strings.Join(append(slices.Clone(f.assigns), f.argv...), " ")
}

// maxOptionSpellings bounds the forms one command is rewritten into for
// one rule (matchOptionSpellings); a command with more meets the rule, so
// that matching stays cheap and fails closed.
const maxOptionSpellings = 64

// commandPatternOptions returns the long options a shell specifier names,
// as written: each word that is "--" and a name, or "-" and a name of two
// letters or more, cut before "=" or "*" ("make --eval*" gives --eval).
func commandPatternOptions(spec string) []string {
	var out []string
	for _, w := range strings.Fields(strings.TrimSuffix(spec, ":*")) {
		if i := strings.IndexAny(w, "=*"); i >= 0 {
			w = w[:i]
		}
		if _, _, _, ok := splitLongOption(w); ok && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// matchOptionSpellings is how a deny or ask rule naming long options meets
// the spellings getopt_long and Go's flag package read as them: each word
// of a command that spells one of the rule's long options (--eva, --e or
// -eval for --eval, --vettool for -vettool, with "=value" or not) is
// rewritten to the rule's spelling, in every combination, and the rule's
// pattern is matched against the result: "make --eval*" meets
// "make --eva=x". The policy does not know the program's other options,
// so every prefix counts.
func (rl permRule) matchOptionSpellings(c permCall) bool {
	if len(rl.longOpts) == 0 {
		return false
	}
	for _, f := range c.denyForms {
		forms := [][]string{nil}
		for _, w := range f.argv {
			alts := []string{w}
			_, val, eq := strings.Cut(w, "=")
			for _, o := range rl.longOpts {
				oname, _, _, _ := splitLongOption(o)
				if spellsLongOption(w, func(n string) bool { return n == oname }, oname) {
					if eq {
						alts = append(alts, o+"="+val)
					} else {
						alts = append(alts, o)
					}
				}
			}
			if len(forms)*len(alts) > maxOptionSpellings {
				return true
			}
			var next [][]string
			for _, form := range forms {
				for _, a := range alts {
					next = append(next, append(slices.Clip(form), a))
				}
			}
			forms = next
		}
		for _, argv := range forms {
			g := shellForm{assigns: f.assigns, argv: argv}
			if rl.command.MatchString(argvText(g.assigns, g.argv, false)) || rl.command.MatchString(g.plainText()) {
				return true
			}
		}
	}
	return false
}

// splitShellCommand returns the simple commands of command as the allow
// rules read them (assignments, then argv with argv0's basename), and
// whether command is complex.
func splitShellCommand(command string) (parts []string, complex bool) {
	cmds, complex, _ := parseShell(command)
	for _, c := range cmds {
		parts = append(parts, argvText(c.Assigns, c.Argv, true))
	}
	return parts, complex
}

// argvText is the text a command pattern is matched against: the words
// joined by one space, a word holding blanks (or empty) quoted so that it
// stays one word; with base, argv0 is its basename (/bin/rm is rm).
func argvText(assigns, argv []string, base bool) string {
	words := make([]string, 0, len(assigns)+len(argv))
	words = append(words, assigns...)
	for i, a := range argv {
		if i == 0 && base && strings.Contains(a, "/") {
			a = path.Base(a)
		}
		if a == "" || strings.ContainsAny(a, " \t\n") {
			a = shellQuote(a)
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// redirectsToFile reports whether a redirection writes a file: anything
// but /dev/null or a descriptor (2>&1, >&-). An allow rule for "echo *"
// must not allow "echo x > ~/.bashrc".
func redirectsToFile(rs []shellRedirect) bool {
	for _, r := range rs {
		switch r.Op {
		case "<", "<<", "<<-", "<<<", "<&":
			continue
		}
		if r.Target == "/dev/null" {
			continue
		}
		if (r.Op == ">&" || r.Op == "<&") && r.Target != "" && strings.Trim(r.Target, "0123456789-") == "" {
			continue
		}
		return true
	}
	return false
}
