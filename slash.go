// slash.go owns the slash commands: the one rule for what prompt text is one,
// which serve (refusing it in required mode) and the ACP child (running it)
// share, the commands the agent runs, and the names a flag may give.
package main

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// slashCommand reports the command name of a prompt text that is a slash
// command: after any leading white space, "/" and a command word
// ([A-Za-z][A-Za-z0-9_-]*) followed by white space or the end of the text.
// Anything else that starts with "/" (a path such as /tmp/notes.txt, //host,
// "/ x", "/1abc") is text for the model. Slash commands run outside the tool
// scheduler, so in required mode serve refuses them unless the operator
// opened one by name; the ACP child decides with this same function, so a
// text serve lets through as plain is plain there too.
func slashCommand(text string) (string, bool) {
	t, ok := strings.CutPrefix(strings.TrimLeftFunc(text, unicode.IsSpace), "/")
	if !ok {
		return "", false
	}
	n := 0
	for n < len(t) && isCommandWordByte(t[n], n == 0) {
		n++
	}
	if next, _ := utf8.DecodeRuneInString(t[n:]); n == 0 || n < len(t) && !unicode.IsSpace(next) {
		return "", false
	}
	return t[:n], true
}

// isCommandWordByte reports whether c may stand in a command word, at its
// start when first is true: a letter first, then letters, digits, '_', '-'.
func isCommandWordByte(c byte, first bool) bool {
	letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	return letter || !first && (c >= '0' && c <= '9' || c == '_' || c == '-')
}

// Slash commands: prompt text that slashCommand says is one. The set is
// small on purpose; none of them runs a tool.
const (
	slashHelp  = "help"
	slashTools = "tools"
)

// slashCommands are the commands and what /help says of each, in its order.
var slashCommands = []struct{ name, what string }{
	{slashHelp, "this text"},
	{slashTools, "the tools the model may call"},
}

// /fork starts a delegated agent: no flag can open it (DESIGN.md §10).
const forkSlashCommand = "fork"

// validCommandName is the name a slash command flag may give: letters,
// digits, '-', '_', '.' and ':'.
func validCommandName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return false
		}
	}
	return true
}
