// jsonsyntax_test.go tests that a syntax error in a policy or a settings
// file names its line and column in the file as written.
package main

import (
	"path/filepath"
	"strconv"
	"testing"
)

func TestPolicySyntaxErrorLineColumn(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ name, body, want string }{
		{"a comma with nothing before it", "{\n  \"rules\": [\n    ,\n  ]\n}\n",
			"invalid JSON at line 3, column 5: invalid character ',' looking for beginning of value"},
		{"after a comment", "{\n  // the default\n  \"default\": \"deny\" x\n}\n",
			"invalid JSON at line 3, column 21: invalid character 'x' after object key:value pair"},
		{"missing comma", "{\n  \"default\": \"deny\"\n  \"rules\": []\n}\n",
			"invalid JSON at line 3, column 3: invalid character '\"' after object key:value pair"},
		{"cut short", "{\n  \"rules\": [\n\n",
			"invalid JSON at line 2, column 13: unexpected end of JSON input"},
		{"wide characters count once", "{\"defaultReason\": \"é→\" x}",
			"invalid JSON at line 1, column 24: invalid character 'x' after object key:value pair"},
	} {
		file := filepath.Join(dir, "policy.json")
		mustWrite(t, file, tt.body)
		code, _, stderr := runAcpguard(t, []string{"provider", "check", "--policy", file})
		want := "acpguard: error: policy " + strconv.Quote(file) + ": " + tt.want + "\n"
		if code == 0 || stderr != want {
			t.Errorf("%s: exit %d, stderr\n%s\nwant\n%s", tt.name, code, stderr, want)
		}
	}
}

func TestSettingsSyntaxErrorLineColumn(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"after a comment", "{\n  // the mode\n  \"tools\": {\"approvalMode\": \"yolo\" x}\n}\n",
			"invalid JSON at line 3, column 36: invalid character 'x' after object key:value pair"},
		{"after a block comment", "{ /* a\n b */ \"tools\" {}}",
			"invalid JSON at line 2, column 15: invalid character '{' after object key"},
		{"byte order mark", "\uFEFF{\"tools\" {}}",
			"invalid JSON at line 1, column 10: invalid character '{' after object key"},
		{"cut short", "{\n  \"tools\": {\n    \"approvalMode\": \"yolo\"\n  \n",
			"invalid JSON at line 3, column 27: unexpected end of JSON input"},
	} {
		_, err := parseSettings([]byte(tt.body))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v, want %s", tt.name, err, tt.want)
		}
	}
}
