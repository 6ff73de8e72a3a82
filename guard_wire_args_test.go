// guard_wire_args_test.go tests the arguments' codec: the strict walk that
// checks them once against encoding/json and the strict decoder, and the
// request body built by appending, against json.Marshal.
package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// wantArgumentsOK is what checkWireArguments must accept, spelled with the
// decoders it stands for: one valid UTF-8 JSON object within the bound with
// no member name given twice.
func wantArgumentsOK(raw []byte) bool {
	t := trimJSONSpace(raw)
	return len(t) > 0 && t[0] == '{' && len(t) <= maxWireArguments && utf8.Valid(raw) && json.Valid(raw) && duplicateMember(raw) == nil
}

func checkArgumentsAgree(t *testing.T, raw []byte) {
	t.Helper()
	got, err := checkWireArguments(raw)
	if want := wantArgumentsOK(raw); (err == nil) != want {
		t.Fatalf("checkWireArguments(%q) = %v, want ok=%v", raw, err, want)
	}
	if err != nil {
		return
	}
	if !bytes.Equal(got, trimJSONSpace(raw)) {
		t.Fatalf("checkWireArguments(%q) returned %q, not the bytes trimmed", raw, got)
	}
	// What passes decodes strictly at the provider.
	if _, err := decodeProviderArguments(got); err != nil {
		t.Fatalf("checked arguments %q do not decode: %v", got, err)
	}
}

func TestCheckWireArguments(t *testing.T) {
	for _, raw := range []string{
		`{}`, ` {"a":1} `, `{"a":[1,-0.5e+3,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9"],"b":{"c":{}}}`,
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"b":1},{"b":1,"b":1}]}`, `{"a":1,"\u0061":2}`,
		`{"\ud800":1,"\udbff":2}`, `{"a":1} {}`, `{"a":1}x`, `[]`, `"x"`, `1`, `null`, ``, ` `, `{`, `{"a"}`,
		`{"a":}`, `{"a":1,}`, `{,}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`,
		`{"a":"\x"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "{\"\xed\xa0\x80\":1}",
		"\v{}", "{}\u00a0", `{"a":[1 2]}`, `{"a":[,]}`, `{"a":[]}`, `{"a" : [ 1 , 2 ] }`,
		`{"` + strings.Repeat("k", 40) + `":1}`,
	} {
		checkArgumentsAgree(t, []byte(raw))
	}
	// Many members take the set, not the pairwise comparison.
	var many strings.Builder
	many.WriteString("{")
	for i := range 3 * strictWalkLinear {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	checkArgumentsAgree(t, []byte(many.String()+"}"))
	checkArgumentsAgree(t, []byte(many.String()+`,"kxxxx":2}`))
	// The depth encoding/json accepts, and one more.
	for _, n := range []int{maxWireArgumentsDepth, maxWireArgumentsDepth + 1} {
		checkArgumentsAgree(t, []byte(strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n)))
		checkArgumentsAgree(t, []byte(`{"a":`+strings.Repeat("[", n-1)+strings.Repeat("]", n-1)+"}"))
	}
	checkArgumentsAgree(t, []byte(`{"a":"`+strings.Repeat("x", maxWireArguments)+`"}`))
}

// The body built by appending is json.Marshal's, and its strings are
// encoding/json's, with and without HTML escaping.
func TestAppendPrepareRequest(t *testing.T) {
	for _, s := range []string{"", "plain", "<a&b>", "q\"\\/", "\b\f\n\r\t\x00\x1f\x7f", "é\u2028\u2029\ufffd", "\xff\xc3", "😀"} {
		checkAppendJSONString(t, s)
		call := prepareRequest{ProtocolVersion: 1, RequestID: "r", SessionID: s, PromptID: "p" + s, ToolCallID: s, ToolName: "t", Arguments: json.RawMessage(`{"a":"\u003c"}`)}
		want, _ := json.Marshal(call)
		if got := appendPrepareRequest(nil, call); !bytes.Equal(got, want) {
			t.Errorf("body for %q\n%s\nwant\n%s", s, got, want)
		}
	}
}

func checkAppendJSONString(t *testing.T, s string) {
	t.Helper()
	want, _ := json.Marshal(s)
	if got := appendJSONString(nil, s, true); !bytes.Equal(got, want) {
		t.Fatalf("appendJSONString(%q, html) = %s, want %s", s, got, want)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	if got := appendJSONString(nil, s, false); !bytes.Equal(got, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))) {
		t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, buf.Bytes())
	}
}

// canonicalArgumentBytes is a fixed point of the provider's canonical form,
// so serve's digest of what it forwards is the provider's.
func TestCanonicalArgumentBytesFixedPoint(t *testing.T) {
	for _, args := range []map[string]any{
		{},
		{"z": 1, "a": []any{true, nil, 2.5, 1e21, "<&>"}, "m": map[string]any{"k": "v\u2028"}},
		{"bad": "\xff\xfe", "\xc3": "key not UTF-8", "ok": "\ufffd"},
		{"n": json.Number("2.50"), "s": []string{"x"}},
	} {
		b, err := canonicalArgumentBytes(args)
		if err != nil {
			t.Fatalf("canonicalArgumentBytes(%v): %v", args, err)
		}
		m, err := decodeProviderArguments(b)
		if err != nil {
			t.Fatalf("canonical %s does not decode: %v", b, err)
		}
		if canon, digest := canonicalArguments(m); !bytes.Equal(canon, b) || digest != argumentsDigest(b) {
			t.Errorf("canonical form of %s is %s: the digests would differ", b, canon)
		}
	}
	if _, err := canonicalArgumentBytes(nil); err == nil {
		t.Error("nil arguments encoded: null is not an object")
	}
}

// FuzzWireArguments checks the strict walk against encoding/json and the
// strict decoder, and the string encoder against json.Marshal.
func FuzzWireArguments(f *testing.F) {
	for _, seed := range []string{
		`{"a":[1,-0.5e+3,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9"],"b":{"c":{}}}`,
		`{"a":1,"\u0061":2}`, `{"a":{"b":1,"b":2}}`, `{"a":1} {}`, `[]`, `{"a":01}`, "{\"a\":\"\xff\"}",
		`{"k1":1,"k2":1,"k3":1,"k4":1,"k5":1,"k6":1,"k7":1,"k8":1,"k9":1,"k10":1,"k11":1,"k12":1,"k13":1,"k14":1,"k15":1,"k16":1,"k17":1,"k1":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkArgumentsAgree(t, raw)
		checkAppendJSONString(t, string(raw))
		// The prepare params a child sends: the same walk, through strictMembers.
		params := append([]byte(`{"sessionId":"s","promptId":"p","toolCallId":"c","toolName":"t","arguments":`), raw...)
		params = append(params, '}')
		p, err := prepareParams(params)
		if ok := wantArgumentsOK(raw) && len(bytes.TrimLeft(raw, " \t\r\n")) > 0; (err == nil) != ok {
			t.Fatalf("prepareParams with arguments %q = %v, want ok=%v", raw, err, ok)
		}
		if err == nil && !bytes.Equal(p.Arguments, trimJSONSpace(raw)) {
			t.Fatalf("prepareParams arguments %q, want %q", p.Arguments, trimJSONSpace(raw))
		}
	})
}

// BenchmarkPrepareArguments: serve's part of a prepare's arguments, the one
// strict walk and digest, beside a decode and canonical re-encode of them.
func BenchmarkPrepareArguments(b *testing.B) {
	params := []byte(`{"sessionId":"0123456789abcdef0123456789abcdef","promptId":"fedcba9876543210fedcba9876543210","toolCallId":"call_1","toolName":"write_file","arguments":{"content":"` + strings.Repeat("hello world ", 40) + `","file_path":"/tmp/ws/out.txt"}}`)
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := prepareParams(params)
			if err != nil {
				b.Fatal(err)
			}
			argumentsDigest(p.Arguments)
		}
	})
	b.Run("decode-reencode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p struct {
				SessionID  string          `json:"sessionId"`
				PromptID   string          `json:"promptId"`
				ToolCallID string          `json:"toolCallId"`
				ToolName   string          `json:"toolName"`
				Arguments  json.RawMessage `json:"arguments"`
			}
			if err := decodeStrict(params, &p); err != nil {
				b.Fatal(err)
			}
			args, err := decodeProviderArguments(p.Arguments)
			if err != nil {
				b.Fatal(err)
			}
			canonicalArguments(args)
		}
	})
}
