// perms_shell.go owns the shell side of Bash(...) permission rules: command
// patterns and the splitting of a command into the parts a rule must allow.
package main

import (
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
// when any part does, including the commands inside $(...), `...` and
// (...), also with their leading NAME=value assignments removed.
func matchShellParts(re *regexp.Regexp, parts []string) bool {
	for _, p := range parts {
		if re.MatchString(p) || re.MatchString(stripEnvAssignments(p)) {
			return true
		}
	}
	return false
}

// allowShellParts is how allow rules with a command pattern meet a command:
// as in Qwen Code, a compound command is allowed only if every part is,
// each part by some rule. A command this splitter does not fully
// understand is never allowed by a pattern. It returns the rules used,
// joined by ", ", or "".
func (r *permissionRules) allowShellParts(c permCall) string {
	if c.tool != toolShell || !c.hasCommand || c.complex || len(c.parts) == 0 {
		return ""
	}
	var used []string
	for _, p := range c.parts {
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
	return strings.Join(used, ", ")
}

// splitShellCommand splits a command on the unquoted operators && || ; | |&
// & and newlines, and on the bounds of $(...), `...`, <(...), >(...) and
// (...), so that the commands inside them become parts too. complex reports
// a construct whose parts it cannot vouch for: a substitution, a subshell,
// a brace group, a here-document, $'...' quoting, an unterminated quote or
// an output redirection to a file.
// Each part has its blanks collapsed.
func splitShellCommand(command string) (parts []string, complex bool) {
	var cur strings.Builder
	flush := func() {
		if p := collapseBlanks(strings.TrimSpace(cur.String())); p != "" {
			parts = append(parts, p)
		}
		cur.Reset()
	}
	inSingle, inDouble := false, false
	depth := 0 // open $( ... ) substitutions
	for i := 0; i < len(command); i++ {
		c := command[i]
		next := byte(0)
		if i+1 < len(command) {
			next = command[i+1]
		}
		switch {
		case inSingle:
			if c == '\'' {
				inSingle = false
			}
			cur.WriteByte(c)
			continue
		case c == '\\':
			cur.WriteByte(c)
			if i+1 < len(command) {
				i++
				cur.WriteByte(command[i])
			} else {
				complex = true
			}
			continue
		case c == '$' && next == '(', c == '`':
			complex = true
			flush()
			if c == '$' {
				depth++
				i++
			}
			continue
		case inDouble:
			if c == '"' {
				inDouble = false
			}
			if c == ')' && depth > 0 { // closes a $( opened inside the quotes
				depth--
				flush()
				continue
			}
			cur.WriteByte(c)
			continue
		case c == '\'':
			if i > 0 && command[i-1] == '$' {
				complex = true
			}
			inSingle = true
			cur.WriteByte(c)
			continue
		case c == '"':
			inDouble = true
			cur.WriteByte(c)
			continue
		}
		switch c {
		case '\n', ';':
			flush()
		case '(', ')':
			complex = true
			if c == ')' && depth > 0 {
				depth--
			}
			flush()
		case '|':
			flush()
			if next == '|' || next == '&' {
				i++
			}
		case '&':
			prev := byte(0)
			if i > 0 {
				prev = command[i-1]
			}
			if prev == '>' || prev == '<' || next == '>' {
				cur.WriteByte(c) // a redirection: 2>&1, &>file
				continue
			}
			flush()
			if next == '&' {
				i++
			}
		case '<':
			if next == '<' {
				complex = true // a here-document's body is not a command
			}
			if next == '(' {
				complex = true
				flush()
				i++
				continue
			}
			cur.WriteByte(c)
		case '>':
			if next == '(' {
				complex = true
				flush()
				i++
				continue
			}
			complex = complex || redirectsToFile(command[i+1:])
			cur.WriteByte(c)
		case '{', '}':
			if cur.Len() == 0 || strings.TrimSpace(cur.String()) == "" {
				complex = true // a brace group, not a literal brace
			}
			cur.WriteByte(c)
		default:
			cur.WriteByte(c)
		}
	}
	if inSingle || inDouble {
		complex = true
	}
	flush()
	return parts, complex
}

// redirectsToFile reports whether the output redirection whose ">" comes
// just before rest writes a file: anything but /dev/null or a descriptor
// (2>&1, >&-). An allow rule for "echo *" must not allow "echo x > ~/.bashrc".
func redirectsToFile(rest string) bool {
	rest = strings.TrimLeft(rest, ">|") // >> and >|
	dup := strings.HasPrefix(rest, "&")
	rest = strings.TrimLeft(strings.TrimPrefix(rest, "&"), " \t")
	end := strings.IndexAny(rest, " \t\n;|&<>()")
	if end < 0 {
		end = len(rest)
	}
	target := rest[:end]
	if target == "/dev/null" {
		return false
	}
	if dup && target != "" && strings.Trim(target, "0123456789-") == "" {
		return false
	}
	return true
}

// envAssignment is a leading NAME=value word, which bash runs the command
// after: "FOO=1 rm -rf x" runs rm.
var envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|"[^"]*"|[^ '"]*) `)

func stripEnvAssignments(p string) string {
	for {
		loc := envAssignment.FindStringIndex(p)
		if loc == nil {
			return p
		}
		p = p[loc[1]:]
	}
}
