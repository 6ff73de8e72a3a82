// slash.go owns the one rule for what prompt text is a slash command, which
// serve (refusing it in required mode) and the ACP child (running it) share.
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
