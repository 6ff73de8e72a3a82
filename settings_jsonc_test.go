// settings_jsonc_test.go tests reading settings files as Qwen Code writes
// them: comments, trailing commas, $version and $schema, model.maxSessionTurns.
package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// Qwen Code's settings files as Qwen writes them, and as its users edit
// them, load: comments, trailing commas, $version and $schema,
// model.maxSessionTurns.
func TestLoadQwenSettingsFiles(t *testing.T) {
	dir := filepath.Join("testdata", "settings", "qwen")
	check := map[string]func(t *testing.T, s *settings){
		"jsonc-comments.json": func(t *testing.T, s *settings) {
			srv := s.MCPServers["pythonTools"]
			if s.Tools.ApprovalMode != modeAutoEdit || srv.Command != "python" || len(srv.Args) != 4 || srv.Timeout != 15000 {
				t.Errorf("loaded %+v %+v", s.Tools, srv)
			}
			if srv.Env["DATABASE_URL"] != "postgres://localhost/db" || srv.Env["API_KEY"] != "a//b/*c*/,}" {
				t.Errorf("string values changed: %q", srv.Env)
			}
			if v, rule := s.Rules.decide(s.Tools.ApprovalMode, "run_shell_command", false, map[string]any{"command": "rm -rf x"}, testCwd, testHome); v != verdictDeny || rule != "Bash(rm *)" {
				t.Errorf("deny rule: %s %q", v, rule)
			}
		},
		"versioned.json": func(t *testing.T, s *settings) {
			if s.Tools.ApprovalMode != modePlan || s.Model.Name != "qwen3-coder-plus" || s.Model.MaxTurns != 30 {
				t.Errorf("loaded %+v %+v", s.Tools, s.Model)
			}
		},
		"unlimited-turns.json": func(t *testing.T, s *settings) {
			if s.Model.MaxTurns != maxMaxTurns || !s.slashCommandDisabled("tools") {
				t.Errorf("loaded %+v %+v", s.Model, s.SlashCommands)
			}
		},
	}
	maps.Copy(check, qwenSettingsChecks)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(check) {
		t.Errorf("%d files in %s, %d checked", len(entries), dir, len(check))
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			s := mustLoad(t, filepath.Join(dir, e.Name()))
			if len(s.Warnings) != 0 && !qwenSettingsWarn[e.Name()] {
				t.Errorf("warnings: %q", s.Warnings)
			}
			if c := check[e.Name()]; c != nil {
				c(t, s)
			}
		})
	}
}

func TestSettingsJSONC(t *testing.T) {
	for _, ok := range []string{
		"\xef\xbb\xbf{}",
		`// a comment` + "\n{}",
		`{/* c */"tools"/**/:/*:*/{"approvalMode"://x` + "\n" + `"plan"}}`,
		`{"permissions":{"allow":["Read",],},}`,
		`{"permissions":{"allow":["Read" /* c */ , // c` + "\n" + `]}}`,
		`{}// no newline at the end`,
	} {
		if _, err := parseSettings([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, tc := range []struct{ json, want string }{
		// Still strict after the pre-pass, and lines and columns are the file's.
		{`{/* c */ "tool":{}}`, `key "tool": unknown key (did you mean "tools"?)`},
		{`{"model":{"name":"a",/*x*/"name":"b",}}`, `duplicate key "model.name"`},
		{`{"tools":{"approvalMode":"plan"} /* unterminated }`, `invalid JSON at line 1, column 34: invalid character '/' after object key:value pair`},
		{`{"permissions":{"allow":[,]}}`, `invalid JSON at line 1, column 26: invalid character ',' looking for beginning of value`},
		{`{"permissions":{"allow":["a",,]}}`, `invalid JSON at line 1, column 30: invalid character ',' looking for beginning of value`},
		{`{"tools":{"approvalMode":,}}`, `invalid JSON at line 1, column 26: invalid character ',' looking for beginning of value`},
		{`{,}`, `invalid JSON at line 1, column 2: invalid character ',' looking for beginning of object key string`},
		{`{"model":{"name":"x"} / }`, `invalid JSON at line 1, column 23: invalid character '/' after object key:value pair`},
		// The comment ends at the newline; the value after it is real.
		{"{// \"tools\":{}\n\"tool\":1}", `key "tool": unknown key (did you mean "tools"?)`},
		{`{"$version":"4"}`, `key "$version": want a number, got string`},
		{`{"$version":null}`, `key "$version": want a number, got null`},
		{`{"$schema":1}`, `key "$schema": want a string, got number`},
	} {
		_, err := parseSettings([]byte(tc.json))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %s", tc.json, err, tc.want)
		}
	}
	// $version takes any number: Qwen writes 4, older files carry less.
	for _, v := range []string{"1", "4", "4.0", "5", "1e400"} {
		mustParse(t, `{"$version":`+v+`,"$schema":"https://example.com/s.json"}`)
	}
}

// model.maxSessionTurns is Qwen Code's name for the turn bound; -1 is
// acpguard's cap. model.maxTurns still works, with one warning.
func TestSettingsMaxSessionTurns(t *testing.T) {
	for _, tc := range []struct {
		json     string
		turns    int
		warnings int
	}{
		{`{}`, defaultMaxTurns, 0},
		{`{"model":{"maxSessionTurns":-1}}`, maxMaxTurns, 0},
		{`{"model":{"maxSessionTurns":1}}`, 1, 0},
		{`{"model":{"maxSessionTurns":1000}}`, 1000, 0},
		{`{"model":{"maxTurns":7}}`, 7, 1},
	} {
		s := mustParse(t, tc.json)
		if s.Model.MaxTurns != tc.turns || len(s.Warnings) != tc.warnings {
			t.Errorf("%s: %d turns, warnings %q", tc.json, s.Model.MaxTurns, s.Warnings)
		}
	}
	for _, tc := range []struct{ json, want string }{
		{`{"model":{"maxSessionTurns":0}}`, `key "model.maxSessionTurns": 0 is not -1 (unlimited, capped at 1000) or between 1 and 1000`},
		{`{"model":{"maxSessionTurns":-2}}`, `key "model.maxSessionTurns": -2 is not -1 (unlimited, capped at 1000) or between 1 and 1000`},
		{`{"model":{"maxSessionTurns":1001}}`, `key "model.maxSessionTurns": 1001 is not -1 (unlimited, capped at 1000) or between 1 and 1000`},
		{`{"model":{"maxSessionTurns":null}}`, `key "model.maxSessionTurns": want an integer, got null`},
		{`{"model":{"maxSessionTurns":"5"}}`, `key "model.maxSessionTurns": want an integer, got string`},
		{`{"model":{"maxSessionTurns":5,"maxTurns":5}}`, `keys "model.maxSessionTurns" and "model.maxTurns": both set; keep only "model.maxSessionTurns" ("model.maxTurns" is its deprecated alias)`},
	} {
		_, err := parseSettings([]byte(tc.json))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %s", tc.json, err, tc.want)
		}
	}
}

// The deprecated key is named on stderr, once, when acp starts.
func TestSettingsMaxTurnsWarning(t *testing.T) {
	c := startACP(t, nil, []string{"--settings", writeSettings(t, `{"model":{"maxTurns":5}}`)})
	c.mustCall("initialize", map[string]any{"protocolVersion": 1}, nil)
	waitFor(t, "the warning", func() bool { return strings.Contains(c.stderrText(), "deprecated") })
	if got := c.stderrText(); strings.Count(got, "deprecated") != 1 || !strings.Contains(got, `model.maxSessionTurns`) {
		t.Errorf("stderr: %s", got)
	}
}

func FuzzSettingsJSONC(f *testing.F) {
	for _, s := range []string{"\xef\xbb\xbf{}", `{"a"://c` + "\n1,}", `[1,/*x*/]`, `"//"`, `{"a":"\"/*"}`, `/*`, `[,]`, `"\`} {
		f.Add([]byte(s), "x//y/*z*/,]")
	}
	f.Fuzz(func(t *testing.T, data []byte, str string) {
		out := blankJSONC(data)
		if len(out) != len(data) {
			t.Fatalf("length %d -> %d", len(data), len(out))
		}
		for i := range out {
			if out[i] != data[i] && out[i] != ' ' {
				t.Fatalf("byte %d: %q -> %q", i, data[i], out[i])
			}
		}
		if json.Valid(data) && string(out) != string(data) {
			t.Fatalf("valid JSON changed: %q -> %q", data, out)
		}
		// A string between comments and before a trailing comma is kept.
		if !utf8.ValidString(str) {
			return // json.Marshal would replace the bad bytes
		}
		q, err := json.Marshal(str)
		if err != nil {
			t.Fatal(err)
		}
		doc := "/*c*/{\"k\"://c\n" + string(q) + ",}"
		var v map[string]string
		if err := json.Unmarshal(blankJSONC([]byte(doc)), &v); err != nil || v["k"] != str {
			t.Fatalf("%q: %v %q", doc, err, v)
		}
	})
}

// serve names the deprecated key once at start, before any child runs.
func TestServeSettingsMaxTurnsWarning(t *testing.T) {
	sp := startServe(t, []string{"--settings", writeSettings(t, `{"model":{"maxTurns":5}}`)})
	count := func() int {
		got := sp.stderr.String()
		return strings.Count(got, `deprecated: use \"model.maxSessionTurns\"`) + strings.Count(got, `deprecated: use "model.maxSessionTurns"`)
	}
	// serve's stderr is copied as it comes: wait for the line, then count.
	waitFor(t, "the deprecation warning on serve's stderr", func() bool { return count() > 0 })
	if n := count(); n != 1 {
		t.Errorf("the warning came %d times: %s", n, sp.stderr.String())
	}
}
