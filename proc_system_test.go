// proc_system_test.go tests what every command is handed of its process:
// visibleText's rule, which keeps a terminal from acting on what it shows.
package main

import "testing"

func TestVisibleText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"printable as it is", `plain "text", ünïcode 字`, `plain "text", ünïcode 字`},
		{"ESC and a title", "\x1b]0;pwned\a", `\x1b]0;pwned\a`},
		{"CR, backspace, tab, newline", "a\rb\bc\td\ne", `a\rb\bc\td\ne`},
		{"C1 CSI as a character", "\u009b2J", `\u009b2J`},
		{"C1 CSI as a lone byte", "\x9b2J", `\x9b2J`},
		{"bidi overrides and isolates", "a\u202eb\u2066c\u200fd", `a\u202eb\u2066c\u200fd`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"a backslash doubled", `C:\dir`, `C:\\dir`},
		{"an escape told from the text of one", "\\x1b\x1b", `\\x1b\x1b`},
		{"quotes kept beside an escape", "say \"hi\"\x07", `say "hi"\a`},
		{"U+FFFD itself is printable", "\ufffd", "\ufffd"},
		{"a truncated character", "ok\xe2\x80", `ok\xe2\x80`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := visibleText(tt.in); got != tt.want {
				t.Errorf("visibleText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
