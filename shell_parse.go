// shell_parse.go owns the one POSIX shell lexer and parser of the package:
// it reads a shell command as bash would, into simple commands (argv after
// quote removal, assignments, redirections), and says when a command cannot
// be reduced to plain words. It also sees through wrapper commands (sudo,
// env, timeout, find -exec, su -c, sh -c, ...). The permission rules
// (perms_shell.go) and the provider's rules build on it (DESIGN.md §10).
package main

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of parseShell: it refuses larger inputs, deeper nesting and more
// commands with an error (and calls the input complex), so that it always
// terminates in time linear in its input.
const (
	maxShellInput    = 64 << 10 // bytes of source
	maxShellDepth    = 32       // nesting of substitutions, subshells, groups, scripts
	maxShellCommands = 1024     // simple commands, wrapper-inner ones included
	maxShellBraces   = 256      // words one word may brace-expand into
)

// shellRedirect is one redirection of a simple command: Op is the operator
// (">", ">>", "<", "<>", ">&", "<&", "<<", "<<-", "<<<", ">|", "&>", "&>>"),
// Fd the descriptor it applies to (-1 when the operator's default), Target
// the word after it (for a here-document, its delimiter). Dynamic marks a
// target that names a path only known when bash runs: it holds a
// parameter, tilde or brace expansion or a glob (a substitution makes the
// command complex as well).
type shellRedirect struct {
	Op      string
	Fd      int
	Target  string
	Dynamic bool
}

// The targets bash opens as sockets, not files: after expansion, a target
// that matches /dev/tcp/*/* or /dev/udp/*/* (bash's redir.c, a textual
// match of the expanded word: //dev/tcp/h/p and /dev/./tcp/h/p are files)
// connects to host and port, whatever the operator.
const (
	shellTCPPrefix = "/dev/tcp/"
	shellUDPPrefix = "/dev/udp/"
)

// opensPath reports whether bash opens the target as a path: every
// operator but the here-documents and here-strings, and a descriptor copy,
// move or close (>&2, <&3-, >&-).
func (r shellRedirect) opensPath() bool {
	switch r.Op {
	case "<<", "<<-", "<<<":
		return false
	case ">&", "<&":
		return r.Dynamic || r.Target == "" || strings.Trim(r.Target, "0123456789-") != ""
	}
	return true
}

// network reports whether the redirection opens a socket, or may: its
// target lies under /dev/tcp/ or /dev/udp/, or is only known when bash
// runs.
func (r shellRedirect) network() bool {
	return r.opensPath() && (r.Dynamic || strings.HasPrefix(r.Target, shellTCPPrefix) || strings.HasPrefix(r.Target, shellUDPPrefix))
}

// reads reports whether the redirection reads its target (<, <>, <&path);
// writes whether it writes it (every other operator that opens a path).
func (r shellRedirect) reads() bool {
	return r.opensPath() && (r.Op == "<" || r.Op == "<>" || r.Op == "<&")
}

func (r shellRedirect) writes() bool {
	return r.opensPath() && r.Op != "<" && r.Op != "<&"
}

// shellCommand is one simple command.
type shellCommand struct {
	Argv      []string        // words after quote removal, wrappers NOT stripped
	Assigns   []string        // leading NAME=value words
	Redirects []shellRedirect // in source order
	Complex   bool            // this command is not plain words
	Why       string          // when Complex: what made it so, e.g. "command substitution"
	// Dynamic marks the words of Argv that hold an expansion ($x, $(...),
	// `...`, $((...)), ~): their value is only known when bash runs.
	Dynamic []bool
}

// setComplex marks c complex for why, keeping the first reason.
func (c *shellCommand) setComplex(why string) {
	if !c.Complex {
		c.Complex, c.Why = true, why
	}
}

// parseShell lexes and parses src as bash would, bounded (maxShellInput,
// maxShellDepth, maxShellCommands); it never panics and always terminates.
// It returns every simple command found, in order (the commands of a
// substitution before the command holding it), including those inside
// subshells ( ), groups { }, control structures and the parts of ; && || |
// & and newlines; complex reports that src as a whole cannot be reduced to
// plain words. On a syntax error it returns the commands found before it,
// complex and the error: bash runs the commands before a syntax error of a
// -c script.
//
// What is complex: command and process substitution, arithmetic, a
// parameter expansion, tilde or glob in the command position, here-documents
// (any), a here-string fed to a shell, eval, source, ., alias, trap, coproc,
// function definitions, `sh -c` with a dynamic script or a complex literal
// one, array assignments, redirections of a compound command, and control
// structures (if, for, while, until, select, case): their inner commands are
// returned, each marked complex. Subshells and groups of plain commands are
// not complex: bash runs exactly their commands.
func parseShell(src string) (cmds []shellCommand, complex bool, err error) {
	return parseShellDepth(src, 0)
}

func parseShellDepth(src string, depth int) (cmds []shellCommand, complex bool, err error) {
	if len(src) > maxShellInput {
		return nil, true, fmt.Errorf("parse shell command: %d bytes, more than the limit of %d", len(src), maxShellInput)
	}
	p := &shParser{src: src, depth: depth}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if e, ok := r.(shAbort); ok {
					p.err = e.err
					return
				}
				panic(r)
			}
		}()
		p.parseSeq(false)
	}()
	if p.err == nil && len(p.stack) > 0 {
		p.err = fmt.Errorf("parse shell command: %q is not closed", p.stack[len(p.stack)-1])
	}
	if p.err == nil && len(p.heredocs) > 0 {
		p.err = fmt.Errorf("parse shell command: here-document %q has no end", p.heredocs[0].delim)
	}
	complex = p.complex || p.err != nil
	for _, c := range p.cmds {
		complex = complex || c.Complex
	}
	return p.cmds, complex, p.err
}

type shAbort struct{ err error }

type shHeredoc struct {
	delim  string
	strip  bool // <<-
	quoted bool // no expansion in the body
}

type shParser struct {
	src      string
	i        int
	depth    int
	cmds     []shellCommand
	complex  bool
	err      error
	stack    []string // open constructs: "(", "{", "if", "for", "while", "case", "$("
	casePat  bool     // a case pattern comes next
	heredocs []shHeredoc
	cur      *shellCommand // the command whose words are being read
}

func (p *shParser) fail(format string, args ...any) {
	panic(shAbort{fmt.Errorf("parse shell command: "+format, args...)})
}

func (p *shParser) peek(k int) byte {
	if p.i+k < len(p.src) {
		return p.src[p.i+k]
	}
	return 0
}

func (p *shParser) has(s string) bool { return strings.HasPrefix(p.src[p.i:], s) }

// addCommand appends a finished command, inner commands of a control
// structure marked complex.
func (p *shParser) addCommand(c shellCommand) {
	if len(p.cmds) >= maxShellCommands {
		p.fail("more than %d commands", maxShellCommands)
	}
	for _, s := range p.stack {
		switch s {
		case "if", "for", "while", "until", "select", "case":
			c.setComplex("inside " + s)
		}
	}
	p.cmds = append(p.cmds, c)
}

// skipBlanks skips blanks, line continuations and comments (a # at the
// start of a word runs to the end of the line).
func (p *shParser) skipBlanks() {
	for p.i < len(p.src) {
		switch c := p.src[p.i]; {
		case c == ' ' || c == '\t':
			p.i++
		case c == '\\' && p.peek(1) == '\n':
			p.i += 2
		case c == '#':
			for p.i < len(p.src) && p.src[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func (p *shParser) push(s string) {
	if len(p.stack)+p.depth >= maxShellDepth {
		p.fail("nested deeper than %d", maxShellDepth)
	}
	p.stack = append(p.stack, s)
}

func (p *shParser) top() string {
	if len(p.stack) == 0 {
		return ""
	}
	return p.stack[len(p.stack)-1]
}

func (p *shParser) pop(want ...string) {
	t := p.top()
	for _, w := range want {
		if t == w {
			p.stack = p.stack[:len(p.stack)-1]
			return
		}
	}
	p.fail("unexpected %q", want[0])
}

func isShellMeta(c byte) bool {
	switch c {
	case ' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')':
		return true
	}
	return false
}

// parseSeq parses commands up to the end of the input or, when inSub, up
// to the ")" closing a command or process substitution.
func (p *shParser) parseSeq(inSub bool) {
	base := len(p.stack)
	needCmd := false // after | && ||: a command must follow
	for {
		p.skipBlanks()
		if p.i >= len(p.src) || needCmd && p.src[p.i] == ')' {
			if needCmd {
				p.fail("a command must follow %q", "|")
			}
			if inSub {
				p.fail("substitution is not closed")
			}
			return
		}
		c := p.src[p.i]
		switch {
		case c == '\n':
			p.i++
			p.readHeredocs()
			continue
		case c == ';' || c == '&' && !p.has("&>") || c == '|':
			op := p.readOp()
			if needCmd {
				p.fail("unexpected %q", op)
			}
			needCmd = op == "|" || op == "|&" || op == "&&" || op == "||"
			if strings.HasPrefix(op, ";;") || op == ";&" {
				if p.top() != "case" {
					p.fail("unexpected %q", op)
				}
				p.casePat = true
			}
			continue
		case c == ')':
			if len(p.stack) == base {
				if inSub {
					p.i++
					return
				}
				p.fail("unexpected %q", ")")
			}
			p.i++
			p.pop("(")
			p.compoundRedirects()
			continue
		case c == '(':
			if p.peek(1) == '(' {
				p.arithCommand()
				continue
			}
			p.i++
			p.push("(")
			needCmd = false
			continue
		}
		if p.top() == "case" && p.casePat {
			p.casePattern()
			continue
		}
		needCmd = false
		p.simpleCommand()
	}
}

// readOp reads a control operator.
func (p *shParser) readOp() string {
	for _, op := range []string{";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|"} {
		if p.has(op) {
			p.i += len(op)
			return op
		}
	}
	p.i++
	return p.src[p.i-1 : p.i]
}

// arithCommand skips a (( ... )) arithmetic command.
func (p *shParser) arithCommand() {
	p.complex = true
	p.i += 2
	p.skipArith()
	p.compoundRedirects()
}

// skipArith skips to the "))" closing an arithmetic expression, reading
// the substitutions inside it.
func (p *shParser) skipArith() {
	depth := 0
	for p.i < len(p.src) {
		switch {
		case p.has("$("):
			var w shWord
			p.dollar(&w)
			continue
		case p.src[p.i] == '`':
			var w shWord
			p.backquote(&w)
			continue
		case p.src[p.i] == '(':
			depth++
		case p.src[p.i] == ')':
			if depth == 0 && p.peek(1) == ')' {
				p.i += 2
				return
			}
			depth--
		}
		p.i++
	}
	p.fail("arithmetic is not closed")
}

// casePattern skips a case pattern up to its ")" (or reads esac).
func (p *shParser) casePattern() {
	if w, ok := p.peekWord(); ok && w == "esac" {
		p.readWord(false)
		p.casePat = false
		p.pop("case")
		p.compoundRedirects()
		return
	}
	if p.peek(0) == '(' {
		p.i++
	}
	for {
		p.skipBlanks()
		switch {
		case p.i >= len(p.src):
			p.fail("case pattern is not closed")
		case p.src[p.i] == ')':
			p.i++
			p.casePat = false
			return
		case p.src[p.i] == '|' || p.src[p.i] == '\n':
			p.i++
		case isShellMeta(p.src[p.i]):
			p.fail("unexpected %q in a case pattern", p.src[p.i:p.i+1])
		default:
			p.readWord(false)
		}
	}
}

// compoundRedirects reads the redirections after ), }, fi, done, esac: a
// compound command with redirections is complex, and they are returned as
// a command of their own, without words, so that the rules see what they
// open.
func (p *shParser) compoundRedirects() {
	var c shellCommand
	for {
		p.skipBlanks()
		if !p.atRedirect() {
			break
		}
		p.redirect(&c)
		p.complex = true
	}
	if len(c.Redirects) > 0 {
		c.setComplex("redirection of a compound command")
		p.addCommand(c)
	}
}

// peekWord returns the next word's literal text when it is unquoted plain
// text, without consuming it.
func (p *shParser) peekWord() (string, bool) {
	j := p.i
	for j < len(p.src) && !isShellMeta(p.src[j]) {
		if strings.IndexByte("'\"\\$`", p.src[j]) >= 0 {
			return "", false
		}
		j++
	}
	return p.src[p.i:j], j > p.i
}

// atRedirect reports whether a redirection starts here: [digits] then a
// redirection operator, or &>.
func (p *shParser) atRedirect() bool {
	j := p.i
	for j < len(p.src) && p.src[j] >= '0' && p.src[j] <= '9' {
		j++
	}
	if j < len(p.src) && (p.src[j] == '<' || p.src[j] == '>') {
		return j+1 >= len(p.src) || p.src[j+1] != '(' // <( is a process substitution
	}
	return j == p.i && p.has("&>")
}

var shellKeywords = map[string]bool{
	"if": true, "then": true, "elif": true, "else": true, "fi": true,
	"for": true, "select": true, "while": true, "until": true, "do": true, "done": true,
	"case": true, "esac": true, "function": true, "coproc": true,
	"{": true, "}": true, "!": true, "[[": true, "in": true,
}

// simpleCommand reads one simple command, or a reserved word in command
// position.
func (p *shParser) simpleCommand() {
	if w, ok := p.peekWord(); ok && shellKeywords[w] && w != "[[" && w != "in" {
		p.keyword(w)
		return
	}
	var c shellCommand
	p.cur = &c
	defer func() { p.cur = nil }()
	cond := false // inside [[ ... ]]
	for {
		p.skipBlanks()
		if p.i >= len(p.src) {
			break
		}
		ch := p.src[p.i]
		if cond {
			if read, closed := p.condToken(&c, ch); read {
				cond = !closed
				continue
			}
		}
		if p.atRedirect() {
			p.redirect(&c)
			continue
		}
		if ch == '(' && len(c.Argv) == 1 && len(c.Assigns) == 0 {
			p.functionDefinition(&c)
			return
		}
		if ch == '(' && (p.peek(1) != '(' || len(c.Argv) > 0) {
			if n := len(c.Assigns); n > 0 && len(c.Argv) == 0 && strings.HasSuffix(c.Assigns[n-1], "=") {
				p.arrayValue(&c)
				continue
			}
			p.fail("unexpected %q", "(")
		}
		if isShellMeta(ch) && !(ch == '<' || ch == '>') {
			break
		}
		if (ch == '<' || ch == '>') && p.peek(1) == '(' {
			w := p.readWord(len(c.Argv) == 0)
			c.Argv, c.Dynamic = append(c.Argv, w.text), append(c.Dynamic, true)
			c.setComplex(w.why)
			continue
		}
		if p.word(&c) {
			cond = true
		}
	}
	if cond {
		p.fail("[[ is not closed")
	}
	if len(c.Argv) == 0 && len(c.Assigns) == 0 && len(c.Redirects) == 0 {
		p.fail("unexpected %q", p.src[p.i:min(p.i+2, len(p.src))])
	}
	p.classify(&c)
	p.addCommand(c)
}

// condToken reads into c, inside [[ ... ]] at ch, what is read there and
// not elsewhere: the closing ]] (closed), or a run of operator characters
// as one word. It reports whether it read anything; a newline fails, as
// [[ is not closed on its line.
func (p *shParser) condToken(c *shellCommand, ch byte) (read, closed bool) {
	if w, ok := p.peekWord(); ok && w == "]]" {
		p.readWord(false)
		c.Argv, c.Dynamic = append(c.Argv, w), append(c.Dynamic, false)
		return true, true
	}
	if ch == '\n' {
		p.fail("[[ is not closed")
	}
	if strings.IndexByte("&|<>()", ch) >= 0 {
		j := p.i
		for j < len(p.src) && strings.IndexByte("&|<>()", p.src[j]) >= 0 {
			j++
		}
		c.Argv, c.Dynamic = append(c.Argv, p.src[p.i:j]), append(c.Dynamic, false)
		p.i = j
		return true, false
	}
	return false, false
}

// functionDefinition reads the "()" after c's one word and adds c as a
// function definition, which makes the whole command complex.
func (p *shParser) functionDefinition(c *shellCommand) {
	// name() compound-command: a function definition.
	p.i++
	p.skipBlanks()
	if p.peek(0) != ')' {
		p.fail("unexpected %q", "(")
	}
	p.i++
	p.complex = true
	c.setComplex("function definition")
	p.addCommand(*c)
}

// word reads one word into c: an assignment before the command name, or
// its words after brace expansion, marking c complex where the word is
// dynamic in the command position or substitutes a command. It reports
// whether the word opens [[ ... ]].
func (p *shParser) word(c *shellCommand) (opensCond bool) {
	cmdPos := len(c.Argv) == 0
	w := p.readWord(cmdPos)
	if cmdPos && w.isAssignment() {
		c.Assigns = append(c.Assigns, w.text)
		if w.why != "" && w.sub {
			c.setComplex(w.why)
		}
		return false
	}
	words := []string{w.text}
	if w.braces {
		words = braceExpand(w)
	}
	if cmdPos {
		if w.why != "" {
			c.setComplex(w.why + " in the command position")
		} else if w.glob && !(w.plain() && (w.text == "[" || w.text == "[[")) {
			c.setComplex("glob in the command position")
		}
		if w.plain() && w.text == "[[" {
			opensCond = true
		}
	} else if w.sub {
		c.setComplex(w.why)
	}
	for _, s := range words {
		c.Argv, c.Dynamic = append(c.Argv, s), append(c.Dynamic, w.why != "")
	}
	return opensCond
}

// arrayValue reads the ( ... ) of NAME=( ... ).
func (p *shParser) arrayValue(c *shellCommand) {
	p.i++
	c.setComplex("array assignment")
	for {
		p.skipBlanks()
		switch {
		case p.i >= len(p.src):
			p.fail("array assignment is not closed")
		case p.src[p.i] == ')':
			p.i++
			return
		case p.src[p.i] == '\n':
			p.i++
		case isShellMeta(p.src[p.i]):
			p.fail("unexpected %q in an array assignment", p.src[p.i:p.i+1])
		default:
			p.readWord(false)
		}
	}
}

// keyword handles a reserved word in command position.
func (p *shParser) keyword(w string) {
	p.readWord(false)
	switch w {
	case "!":
	case "{":
		p.push("{")
	case "}":
		p.pop("{")
		p.compoundRedirects()
	case "if", "while", "until":
		p.complex = true
		p.push(w)
	case "then", "elif", "else":
		if p.top() != "if" {
			p.fail("unexpected %q", w)
		}
	case "fi":
		p.pop("if")
		p.compoundRedirects()
	case "do":
		switch p.top() {
		case "for", "select", "while", "until":
		default:
			p.fail("unexpected %q", w)
		}
	case "done":
		p.pop("for", "select", "while", "until")
		p.compoundRedirects()
	case "for", "select":
		p.complex = true
		p.push(w)
		p.skipBlanks()
		if p.has("((") {
			p.i += 2
			p.skipArith()
			return
		}
		p.readWord(false) // the name
		p.skipBlanks()
		for p.peek(0) == '\n' {
			p.i++
			p.skipBlanks()
		}
		if in, ok := p.peekWord(); ok && in == "in" {
			p.readWord(false)
			for {
				p.skipBlanks()
				if p.i >= len(p.src) || isShellMeta(p.src[p.i]) {
					return
				}
				p.readWord(false)
			}
		}
	case "case":
		p.complex = true
		p.push("case")
		p.skipBlanks()
		p.readWord(false)
		p.skipBlanks()
		for p.peek(0) == '\n' {
			p.i++
			p.skipBlanks()
		}
		if in, ok := p.peekWord(); !ok || in != "in" {
			p.fail("case without %q", "in")
		}
		p.readWord(false)
		p.casePat = true
	case "esac":
		p.fail("unexpected %q", w)
	case "function", "coproc":
		p.complex = true
		c := shellCommand{Argv: []string{w}, Dynamic: []bool{false}}
		c.setComplex(map[string]string{"function": "function definition", "coproc": "coproc"}[w])
		p.skipBlanks()
		if n, ok := p.peekWord(); ok && !shellKeywords[n] {
			p.readWord(false)
			c.Argv, c.Dynamic = append(c.Argv, n), append(c.Dynamic, false)
			p.skipBlanks()
			if w == "function" && p.has("()") {
				p.i += 2
			}
		}
		p.addCommand(c)
	}
}

// redirect reads one redirection into c.
func (p *shParser) redirect(c *shellCommand) {
	fd := -1
	j := p.i
	for j < len(p.src) && p.src[j] >= '0' && p.src[j] <= '9' {
		j++
	}
	if j > p.i {
		n, err := strconv.Atoi(p.src[p.i:j])
		if err != nil || n > 1<<20 {
			n = 1 << 20
		}
		fd = n
		p.i = j
	}
	op := ""
	for _, o := range []string{"&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">&", ">|", "<", ">"} {
		if p.has(o) {
			op = o
			break
		}
	}
	p.i += len(op)
	p.skipBlanks()
	if p.i >= len(p.src) || isShellMeta(p.src[p.i]) {
		p.fail("redirection %q without a target", op)
	}
	w := p.readWord(false)
	r := shellRedirect{Op: op, Fd: fd, Target: w.text}
	if r.opensPath() {
		// bash expands the target before it opens it: a target only known
		// then may name any file, or a socket.
		switch {
		case w.sub:
		case w.why != "":
			r.Dynamic = true
			c.setComplex(w.why + " in a redirection target")
		case w.glob:
			r.Dynamic = true
			c.setComplex("glob in a redirection target")
		case w.braces && len(braceExpand(w)) > 1:
			r.Dynamic = true
			c.setComplex("brace expansion in a redirection target")
		}
		r.Dynamic = r.Dynamic || w.sub
	}
	if w.sub {
		c.setComplex(w.why)
	}
	c.Redirects = append(c.Redirects, r)
	if op == "<<" || op == "<<-" {
		c.setComplex("here-document")
		p.heredocs = append(p.heredocs, shHeredoc{delim: w.text, strip: op == "<<-", quoted: w.quoted})
	}
}

// readHeredocs reads the bodies of the here-documents of the line just
// ended; an unquoted body's substitutions run, so they are parsed.
func (p *shParser) readHeredocs() {
	for len(p.heredocs) > 0 {
		h := p.heredocs[0]
		p.heredocs = p.heredocs[1:]
		start := p.i
		for {
			if p.i >= len(p.src) {
				p.fail("here-document %q has no end", h.delim)
			}
			end := strings.IndexByte(p.src[p.i:], '\n')
			line := p.src[p.i:]
			if end >= 0 {
				line = line[:end]
			}
			next := len(p.src)
			if end >= 0 {
				next = p.i + end + 1
			}
			check := line
			if h.strip {
				check = strings.TrimLeft(check, "\t")
			}
			if check == h.delim {
				body := p.src[start:p.i]
				p.i = next
				if !h.quoted {
					p.bodySubstitutions(body)
				}
				break
			}
			p.i = next
		}
	}
}

// bodySubstitutions parses the substitutions of an unquoted here-document.
func (p *shParser) bodySubstitutions(body string) {
	if !strings.ContainsAny(body, "$`") {
		return
	}
	if p.depth+len(p.stack)+1 >= maxShellDepth {
		p.fail("nested deeper than %d", maxShellDepth)
	}
	sub := &shParser{src: body, depth: p.depth + len(p.stack) + 1, cmds: p.cmds}
	var w shWord
	for sub.i < len(sub.src) {
		switch c := sub.src[sub.i]; {
		case c == '\\':
			sub.i += 2
		case c == '$':
			sub.dollar(&w)
		case c == '`':
			sub.backquote(&w)
		default:
			sub.i++
		}
	}
	p.cmds = sub.cmds
}

// shWord is a word being read: its text after quote removal, which bytes
// were quoted, and what it holds.
type shWord struct {
	text   string
	q      []bool // q[i]: text[i] was quoted or escaped
	quoted bool   // some part was quoted
	glob   bool   // an unquoted * ? [
	braces bool   // an unquoted { and }
	sub    bool   // holds a command or process substitution or arithmetic
	why    string // the first expansion in it, "" for none
	b      strings.Builder
}

func (w *shWord) add(s string, quoted bool) {
	w.b.WriteString(s)
	for range len(s) {
		w.q = append(w.q, quoted)
	}
}

func (w *shWord) expansion(why, src string, sub bool) {
	if w.why == "" || sub && !w.sub {
		w.why = why
	}
	w.sub = w.sub || sub
	w.add(src, true)
}

func (w *shWord) plain() bool { return !w.quoted && w.why == "" }

// isAssignment reports NAME=... with NAME and = unquoted.
func (w *shWord) isAssignment() bool {
	eq := strings.IndexByte(w.text, '=')
	if eq <= 0 {
		return false
	}
	name := strings.TrimSuffix(w.text[:eq], "+")
	if name == "" || w.q[eq] {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if w.q[i] || !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// readWord reads one word.
func (p *shParser) readWord(cmdPos bool) *shWord {
	w := &shWord{}
	start := p.i
	for p.i < len(p.src) {
		c := p.src[p.i]
		if (c == '<' || c == '>') && p.peek(1) == '(' && p.i == start {
			p.procSub(w)
			continue
		}
		if isShellMeta(c) {
			break
		}
		switch c {
		case '\'':
			end := strings.IndexByte(p.src[p.i+1:], '\'')
			if end < 0 {
				p.fail("unterminated single quote")
			}
			w.add(p.src[p.i+1:p.i+1+end], true)
			w.quoted = true
			p.i += end + 2
		case '"':
			w.quoted = true
			p.i++
			p.doubleQuoted(w)
		case '\\':
			switch {
			case p.peek(1) == '\n':
				p.i += 2
			case p.i+1 >= len(p.src):
				w.add("\\", false) // bash keeps a trailing backslash
				p.i++
			default:
				_, n := utf8.DecodeRuneInString(p.src[p.i+1:])
				w.add(p.src[p.i+1:p.i+1+n], true)
				w.quoted = true
				p.i += 1 + n
			}
		case '$':
			p.dollar(w)
		case '`':
			p.backquote(w)
		case '~':
			if p.i == start {
				w.expansion("tilde expansion", "~", false)
				p.i++
			} else {
				w.add("~", false)
				p.i++
			}
		default:
			if c == '*' || c == '?' || c == '[' {
				w.glob = true
			}
			if c == '{' || c == '}' {
				w.braces = true
			}
			if (c == '*' || c == '?' || c == '+' || c == '@' || c == '!') && p.peek(1) == '(' {
				// an extglob pattern: ?(a|b) is one word in bash
				end := strings.IndexByte(p.src[p.i:], ')')
				if end < 0 {
					p.fail("unexpected %q", "(")
				}
				w.glob = true
				w.add(p.src[p.i:p.i+end+1], false)
				p.i += end + 1
				continue
			}
			w.add(p.src[p.i:p.i+1], false)
			p.i++
		}
	}
	w.text = w.b.String()
	w.b.Reset()
	return w
}

// doubleQuoted reads the inside of "..." after the opening quote.
func (p *shParser) doubleQuoted(w *shWord) {
	for p.i < len(p.src) {
		c := p.src[p.i]
		switch c {
		case '"':
			p.i++
			return
		case '\\':
			switch n := p.peek(1); n {
			case '\n':
				p.i += 2
			case '$', '`', '"', '\\':
				w.add(string(n), true)
				p.i += 2
			default:
				w.add("\\", true)
				p.i++
			}
		case '$':
			p.dollar(w)
		case '`':
			p.backquote(w)
		default:
			w.add(p.src[p.i:p.i+1], true)
			p.i++
		}
	}
	p.fail("unterminated double quote")
}

// dollar reads what starts with $: a parameter, a substitution, $'...' or
// $"...".
func (p *shParser) dollar(w *shWord) {
	start := p.i
	p.i++
	switch c := p.peek(0); {
	case p.has("(("):
		p.i += 2
		p.skipArith()
		w.expansion("arithmetic expansion", p.src[start:p.i], true)
	case c == '(':
		p.i++
		p.nested(func() { p.parseSeq(true) })
		w.expansion("command substitution", p.src[start:p.i], true)
	case c == '{':
		p.i++
		p.braceParam(w)
		w.expansion("parameter expansion", p.src[start:p.i], false)
	case c == '\'':
		p.i++
		w.quoted = true
		p.ansiC(w)
	case c == '"':
		p.i++
		w.quoted = true
		p.doubleQuoted(w)
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		for p.i < len(p.src) && (p.src[p.i] == '_' || p.src[p.i] >= 'a' && p.src[p.i] <= 'z' || p.src[p.i] >= 'A' && p.src[p.i] <= 'Z' || p.src[p.i] >= '0' && p.src[p.i] <= '9') {
			p.i++
		}
		w.expansion("parameter expansion", p.src[start:p.i], false)
	case c >= '0' && c <= '9' || strings.IndexByte("@*#?$!-", c) >= 0 && c != 0:
		p.i++
		w.expansion("parameter expansion", p.src[start:p.i], false)
	default:
		w.add("$", false) // a lone $ is literal
	}
}

// nested runs f one level deeper, collecting its commands into p.
func (p *shParser) nested(f func()) {
	saveStack, saveCase, saveCur := p.stack, p.casePat, p.cur
	if len(p.stack)+p.depth+1 >= maxShellDepth {
		p.fail("nested deeper than %d", maxShellDepth)
	}
	p.depth += len(p.stack) + 1
	p.stack, p.casePat, p.cur = nil, false, nil
	f()
	if len(p.stack) > 0 {
		p.fail("%q is not closed", p.top())
	}
	p.depth -= len(saveStack) + 1
	p.stack, p.casePat, p.cur = saveStack, saveCase, saveCur
}

// braceParam reads ${...} after "${", parsing substitutions inside it.
func (p *shParser) braceParam(w *shWord) {
	depth := 0
	var inner shWord
	for p.i < len(p.src) {
		switch c := p.src[p.i]; c {
		case '}':
			if depth == 0 {
				p.i++
				if inner.sub {
					w.sub, w.why = true, inner.why
				}
				return
			}
			depth--
			p.i++
		case '{':
			depth++
			p.i++
		case '\\':
			p.i += 2
		case '\'':
			end := strings.IndexByte(p.src[p.i+1:], '\'')
			if end < 0 {
				p.fail("unterminated single quote")
			}
			p.i += end + 2
		case '"':
			p.i++
			p.doubleQuoted(&inner)
		case '$':
			p.dollar(&inner)
		case '`':
			p.backquote(&inner)
		default:
			p.i++
		}
	}
	p.fail("parameter expansion is not closed")
}

// backquote reads `...`, whose inside is a command after its \` \\ \$
// escapes are removed.
func (p *shParser) backquote(w *shWord) {
	start := p.i
	p.i++
	var inner strings.Builder
	for {
		if p.i >= len(p.src) {
			p.fail("unterminated backquote")
		}
		c := p.src[p.i]
		if c == '`' {
			p.i++
			break
		}
		if c == '\\' && p.i+1 < len(p.src) && strings.IndexByte("`\\$", p.src[p.i+1]) >= 0 {
			inner.WriteByte(p.src[p.i+1])
			p.i += 2
			continue
		}
		inner.WriteByte(c)
		p.i++
	}
	if p.depth+len(p.stack)+1 >= maxShellDepth {
		p.fail("nested deeper than %d", maxShellDepth)
	}
	sub := &shParser{src: inner.String(), depth: p.depth + len(p.stack) + 1, cmds: p.cmds}
	func() {
		defer func() {
			if r := recover(); r != nil {
				p.cmds = sub.cmds
				panic(r)
			}
		}()
		sub.parseSeq(false)
		if len(sub.stack) > 0 {
			sub.fail("%q is not closed", sub.top())
		}
	}()
	p.cmds = sub.cmds
	p.complex = p.complex || sub.complex
	w.expansion("command substitution", p.src[start:p.i], true)
}

// procSub reads <(...) or >(...).
func (p *shParser) procSub(w *shWord) {
	start := p.i
	p.i += 2
	p.nested(func() { p.parseSeq(true) })
	w.expansion("process substitution", p.src[start:p.i], true)
}

// ansiC reads the inside of $'...' after the quote, decoding its escapes.
func (p *shParser) ansiC(w *shWord) {
	for p.i < len(p.src) {
		c := p.src[p.i]
		if c == '\'' {
			p.i++
			return
		}
		if c != '\\' || p.i+1 >= len(p.src) {
			w.add(p.src[p.i:p.i+1], true)
			p.i++
			continue
		}
		e := p.src[p.i+1]
		p.i += 2
		simple := map[byte]string{'a': "\a", 'b': "\b", 'e': "\x1b", 'E': "\x1b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v", '\\': "\\", '\'': "'", '"': "\"", '?': "?"}
		if s, ok := simple[e]; ok {
			w.add(s, true)
			continue
		}
		digits := func(max int, ok func(byte) bool) string {
			j := p.i
			for j < len(p.src) && j-p.i < max && ok(p.src[j]) {
				j++
			}
			s := p.src[p.i:j]
			p.i = j
			return s
		}
		isHex := func(b byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", b) >= 0 }
		switch {
		case e >= '0' && e <= '7':
			p.i--
			n, _ := strconv.ParseUint(digits(3, func(b byte) bool { return b >= '0' && b <= '7' }), 8, 16)
			w.add(string([]byte{byte(n)}), true)
		case e == 'x':
			h := digits(2, isHex)
			if h == "" {
				w.add("\\x", true)
				continue
			}
			n, _ := strconv.ParseUint(h, 16, 8)
			w.add(string([]byte{byte(n)}), true)
		case e == 'u' || e == 'U':
			max := 4
			if e == 'U' {
				max = 8
			}
			h := digits(max, isHex)
			if h == "" {
				w.add("\\"+string(e), true)
				continue
			}
			n, _ := strconv.ParseUint(h, 16, 32)
			w.add(string(rune(n)), true)
		case e == 'c':
			// \cX is a control character; rare enough to refuse to read.
			w.expansion("$'\\c' escape", "\\c", false)
		default:
			w.add("\\"+string(e), true)
		}
	}
	p.fail("unterminated $' quote")
}

// braceExpand expands the unquoted {a,b} and {1..3} of a word, as bash
// does, into at most maxShellBraces words.
func braceExpand(w *shWord) []string {
	out := []string{}
	var rec func(text string, q []bool)
	rec = func(text string, q []bool) {
		if len(out) > maxShellBraces {
			return
		}
		open, close, commas := findBrace(text, q)
		if open < 0 {
			out = append(out, text)
			return
		}
		pre, body, post := text[:open], text[open+1:close], text[close+1:]
		qpre, qbody, qpost := q[:open], q[open+1:close], q[close+1:]
		var alts []string
		var qalts [][]bool
		if len(commas) == 0 {
			alts = braceSequence(body)
			for _, a := range alts {
				qalts = append(qalts, make([]bool, len(a)))
			}
		} else {
			last := 0
			for _, c := range append(commas, len(body)) {
				alts = append(alts, body[last:c])
				qalts = append(qalts, qbody[last:c])
				last = c + 1
			}
		}
		for k, a := range alts {
			nq := append(append(append([]bool{}, qpre...), qalts[k]...), qpost...)
			rec(pre+a+post, nq)
		}
	}
	rec(w.text, w.q)
	if len(out) > maxShellBraces {
		return []string{w.text}
	}
	return out
}

// findBrace finds the first unquoted {...} with a top-level comma or a
// valid sequence; commas are indexes into the body.
func findBrace(text string, q []bool) (open, close int, commas []int) {
	for o := 0; o < len(text); o++ {
		if text[o] != '{' || q[o] || o > 0 && text[o-1] == '$' && !q[o-1] {
			continue
		}
		depth := 0
		commas = nil
		for j := o + 1; j < len(text); j++ {
			if q[j] {
				continue
			}
			switch text[j] {
			case '{':
				depth++
			case '}':
				if depth > 0 {
					depth--
					continue
				}
				if len(commas) > 0 || braceSequence(text[o+1:j]) != nil {
					return o, j, commas
				}
				j = len(text)
			case ',':
				if depth == 0 {
					commas = append(commas, j-o-1)
				}
			}
		}
	}
	return -1, -1, nil
}

// braceSequence expands a..b for integers or single letters (with an
// optional ..step), nil when body is not one.
func braceSequence(body string) []string {
	parts := strings.Split(body, "..")
	if len(parts) != 2 && len(parts) != 3 {
		return nil
	}
	step := 1
	if len(parts) == 3 {
		s, err := strconv.Atoi(parts[2])
		if err != nil || s == 0 {
			return nil
		}
		step = max(s, -s)
	}
	a, errA := strconv.Atoi(parts[0])
	b, errB := strconv.Atoi(parts[1])
	letters := false
	if errA != nil || errB != nil {
		if len(parts[0]) != 1 || len(parts[1]) != 1 || !isLetter(parts[0][0]) || !isLetter(parts[1][0]) {
			return nil
		}
		a, b, letters = int(parts[0][0]), int(parts[1][0]), true
	}
	if (b-a)/step > maxShellBraces || (a-b)/step > maxShellBraces {
		return make([]string, maxShellBraces+1) // too many: braceExpand gives up
	}
	var out []string
	for v := a; ; {
		if letters {
			out = append(out, string(rune(v)))
		} else {
			out = append(out, strconv.Itoa(v))
		}
		if v == b || a <= b && v+step > b || a > b && v-step < b {
			break
		}
		if a <= b {
			v += step
		} else {
			v -= step
		}
	}
	return out
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// classify marks a finished simple command complex for what it runs:
// eval, source, a shell fed a script it cannot read, and parses the
// literal script of sh -c into more commands.
func (p *shParser) classify(c *shellCommand) {
	argv, dyn, ok := stripWrappers(c.Argv, c.Dynamic)
	if !ok {
		c.setComplex("a wrapper whose command is dynamic")
	}
	if len(argv) == 0 {
		return
	}
	name := path.Base(argv[0])
	switch name {
	case "eval", "source", ".", "alias", "trap", "fc":
		c.setComplex(name)
		return
	}
	if shellNames[name] {
		for _, r := range c.Redirects {
			if r.Op == "<<<" {
				c.setComplex("here-string fed to a shell")
			}
		}
		if script, sdyn, has := shellScriptArg(argv, dyn); has {
			if sdyn {
				c.setComplex(name + " -c with a dynamic script")
				return
			}
			if p.depth+len(p.stack)+1 >= maxShellDepth {
				p.fail("nested deeper than %d", maxShellDepth)
			}
			inner, cx, err := parseShellDepth(script, p.depth+len(p.stack)+1)
			if err != nil || cx {
				c.setComplex(name + " -c with a complex script")
			}
			_ = inner // the script's commands are expandWrappers' to return
		}
	}
}

// shellNames are the shells whose -c runs a script.
var shellNames = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true, "fish": true, "su": true}

// shellScriptArg finds the script of `sh [options] -c script` or
// `su [options] [user] -c script`.
func shellScriptArg(argv []string, dyn []bool) (script string, dynamic, ok bool) {
	su := path.Base(argv[0]) == "su"
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			return "", false, false
		case a == "-o" || a == "-O" || a == "+o" || a == "+O" || a == "--rcfile" || a == "--init-file",
			su && (a == "-s" || a == "-g" || a == "-G" || a == "-w" || a == "--shell" || a == "--group"):
			i++
		case strings.HasPrefix(a, "--command="):
			return strings.TrimPrefix(a, "--command="), dyn[i], true
		case a == "--command" || a == "-c" || !su && len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'c'):
			if i+1 < len(argv) {
				return argv[i+1], dyn[i+1], true
			}
			return "", false, false
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
		case su:
			// the user name
		default:
			return "", false, false // a script file
		}
	}
	return "", false, false
}

// wrapperSpec says which options of a wrapper take a value.
type wrapperSpec struct {
	withValue  string   // single-letter options taking a value
	long       []string // long options taking a value (without =)
	positional int      // positional words before the command (timeout's duration)
	assigns    bool     // NAME=value words may come before the command (env, sudo)
	stopOn     string   // single-letter options after which nothing runs (command -v)
}

var shellWrappers = map[string]wrapperSpec{
	"command": {stopOn: "vV"},
	"builtin": {},
	"env":     {withValue: "uCSP", long: []string{"--unset", "--chdir", "--split-string", "--block-signal", "--default-signal", "--ignore-signal"}, assigns: true},
	"exec":    {withValue: "a"},
	"nice":    {withValue: "n", long: []string{"--adjustment"}},
	"nohup":   {},
	"setsid":  {},
	"timeout": {withValue: "sk", long: []string{"--signal", "--kill-after"}, positional: 1},
	"xargs":   {withValue: "ILnPsdEa", long: []string{"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--max-lines", "--replace", "--eof", "--process-slot-var"}},
	"sudo":    {withValue: "ugCDhprtUTR", long: []string{"--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--other-user", "--command-timeout", "--chroot"}, assigns: true, stopOn: "leKVv"},
	"doas":    {withValue: "uC", stopOn: "L"},
	"stdbuf":  {withValue: "ioe", long: []string{"--input", "--output", "--error"}},
	"time":    {withValue: "fo", long: []string{"--format", "--output"}},
	"busybox": {},
	"ionice":  {withValue: "cnpP", long: []string{"--class", "--classdata", "--pid", "--pgid"}},
}

// stripWrappers returns argv with its wrapper commands removed (sudo env
// X=1 nice -n 5 rm x is rm x), dyn alike. ok is false when a wrapper's
// command word is dynamic, or the wrapper's options cannot be read.
func stripWrappers(argv []string, dyn []bool) ([]string, []bool, bool) {
	for range 16 {
		if len(argv) == 0 {
			return argv, dyn, true
		}
		name := path.Base(argv[0])
		spec, ok := shellWrappers[name]
		if !ok {
			return argv, dyn, true
		}
		i := 1
		positional := spec.positional
	words:
		for i < len(argv) {
			a := argv[i]
			switch {
			case dyn[i] && strings.HasPrefix(a, "-"):
				return argv, dyn, false
			case a == "--":
				i++
				break words
			case strings.HasPrefix(a, "--"):
				opt, _, hasEq := strings.Cut(a, "=")
				i++
				for _, l := range spec.long {
					if opt == l && !hasEq {
						i++
					}
				}
				if name == "env" && (opt == "--split-string") {
					return argv, dyn, false
				}
			case len(a) > 1 && a[0] == '-' && !(name == "nice" && isDigits(a[1:])) && !(name == "timeout" && positional > 0 && isDuration(a)):
				i++
				for k := 1; k < len(a); k++ {
					if strings.IndexByte(spec.stopOn, a[k]) >= 0 {
						return argv[:1], dyn[:1], true // nothing runs: command -v x
					}
					if strings.IndexByte(spec.withValue, a[k]) >= 0 {
						if name == "env" && a[k] == 'S' {
							return argv, dyn, false // env -S splits a string
						}
						if k == len(a)-1 {
							i++
						}
						break
					}
				}
			case name == "nice" && len(a) > 1 && a[0] == '-':
				i++
			case spec.assigns && isAssignWord(a):
				i++
			case positional > 0:
				positional--
				i++
			default:
				break words
			}
		}
		if name == "xargs" && i >= len(argv) {
			return []string{"echo"}, []bool{false}, true // xargs runs echo by default
		}
		for ; spec.assigns && i < len(argv) && isAssignWord(argv[i]); i++ {
		}
		if i >= len(argv) {
			return argv, dyn, true // the wrapper alone: env prints, sudo -s asks
		}
		if dyn[i] {
			return argv, dyn, false
		}
		argv, dyn = argv[i:], dyn[i:]
	}
	return argv, dyn, false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isDuration(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.smhd") == ""
}

func isAssignWord(s string) bool {
	eq := strings.IndexByte(s, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := s[i]
		if !(c == '_' || isLetter(c) || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// splitLongOption splits an option word into its name after the dashes,
// the name with its value, and whether it has two dashes: --name[=value],
// or -name[=value] with a name of two letters or more (one letter is a
// short option). ok is false for any other word.
func splitLongOption(w string) (name, full string, double, ok bool) {
	switch {
	case strings.HasPrefix(w, "--"):
		full, double = w[2:], true
	case strings.HasPrefix(w, "-"):
		full = w[1:]
	default:
		return "", "", false, false
	}
	name, _, _ = strings.Cut(full, "=")
	return name, full, double, name != "" && (double || len(name) >= 2)
}

// spellsLongOption reports whether an option word spells a long option as
// programs read it: the option's name (matches), or name=value, with two
// dashes or one (Go's flag package reads -name as --name, getopt_long_only
// programs too), or with two dashes a non-empty prefix of lit, the
// literal part of the option's name (GNU getopt_long and npm take any
// unambiguous prefix: --eva is --eval). The rules that deny an option meet
// every such spelling: they do not know the program's other options, so
// every prefix counts.
func spellsLongOption(w string, matches func(string) bool, lit string) bool {
	name, full, double, ok := splitLongOption(w)
	return ok && (matches(name) || matches(full) || double && strings.HasPrefix(lit, name))
}

// commandName returns the effective command of c after seeing through
// wrappers (command, env, exec, nice, nohup, timeout, xargs, sudo, doas,
// stdbuf, time, ...), as a basename: `sudo /bin/rm x` is "rm". It is ""
// for a command without words.
func commandName(c shellCommand) string {
	argv, _, _ := stripWrappers(c.Argv, dynOf(c))
	if len(argv) == 0 {
		return ""
	}
	return path.Base(argv[0])
}

// dynOf returns c.Dynamic, all false when the command was built by hand.
func dynOf(c shellCommand) []bool {
	if len(c.Dynamic) == len(c.Argv) {
		return c.Dynamic
	}
	return make([]bool, len(c.Argv))
}

// expandWrappers returns the other commands c runs: its effective command
// when wrappers were stripped (Argv from the command on, argv0 as written),
// the commands of the literal script of `su -c` and `sh -c`, and those of
// find's -exec, -execdir, -ok and -okdir, each seen through in turn. c
// itself is not in the result. The result is bounded by maxShellCommands.
func expandWrappers(c shellCommand) []shellCommand {
	var out []shellCommand
	var rec func(c shellCommand, depth int)
	rec = func(c shellCommand, depth int) {
		if depth > maxShellDepth || len(out) >= maxShellCommands {
			return
		}
		dyn := dynOf(c)
		argv, dyn, _ := stripWrappers(c.Argv, dyn)
		if len(argv) == 0 {
			return
		}
		eff := c
		if !slices.Equal(argv, c.Argv) && !(len(argv) == 1 && argv[0] == c.Argv[0]) {
			eff = shellCommand{Argv: argv, Dynamic: dyn, Redirects: c.Redirects, Complex: c.Complex, Why: c.Why}
			out = append(out, eff)
		}
		name := path.Base(argv[0])
		if shellNames[name] {
			if script, sdyn, ok := shellScriptArg(argv, dyn); ok && !sdyn {
				inner, _, _ := parseShellDepth(script, depth+1)
				for _, ic := range inner {
					out = append(out, ic)
					rec(ic, depth+1)
				}
			}
		}
		if name == "find" {
			for i := 1; i < len(argv); i++ {
				switch argv[i] {
				case "-exec", "-execdir", "-ok", "-okdir":
					j := i + 1
					for j < len(argv) && argv[j] != ";" && argv[j] != "+" {
						j++
					}
					if j > i+1 {
						ic := shellCommand{Argv: argv[i+1 : j], Dynamic: dyn[i+1 : j]}
						out = append(out, ic)
						rec(ic, depth+1)
					}
					i = j
				}
			}
		}
	}
	rec(c, 0)
	if len(out) > maxShellCommands {
		out = out[:maxShellCommands]
	}
	return out
}
