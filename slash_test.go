// slash_test.go checks the slash-command rule against its definition on any
// text a host can send.
package main

import (
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// slashRule is the rule as its definition writes it.
var slashRule = regexp.MustCompile(`^/([A-Za-z][A-Za-z0-9_-]*)(\s|$)`)

func FuzzSlashCommand(f *testing.F) {
	for _, s := range []string{"/help", "/help me", "/tmp/x", "//host", "/ x", "/1abc", "/a-b_c\n", " \t/fork", "/", "", "/help\u00a0x", "/\u00e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		name, ok := slashCommand(text)
		rest := strings.TrimLeftFunc(text, unicode.IsSpace)
		m := slashRule.FindStringSubmatch(rest)
		// \s is ASCII white space only; the rule also ends a word at any
		// Unicode space, which refuses more as a command, never less.
		if m != nil && (!ok || name != m[1]) {
			t.Fatalf("slashCommand(%q) = %q, %v; the rule says %q", text, name, ok, m[1])
		}
		if ok && !strings.HasPrefix(rest, "/"+name) {
			t.Fatalf("slashCommand(%q) = %q, not the text's first word", text, name)
		}
		if ok && (name == "" || !slashRule.MatchString("/"+name)) {
			t.Fatalf("slashCommand(%q) = %q, not a command word", text, name)
		}
	})
}
