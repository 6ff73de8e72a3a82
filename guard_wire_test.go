// guard_wire_test.go fuzzes the client's decoders of a provider's bytes (the
// two response decoders) and checks the canonical argument digest.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// seedResponses adds every replayed body of one route to the corpus.
func seedResponses(f *testing.F, route, id string) {
	for _, v := range loadWireVectors[wireResponseVector](f, "response") {
		if v.Route == route {
			f.Add([]byte(strings.ReplaceAll(v.Body, "$ID", id)), id)
		}
	}
}

func FuzzDecodePrepareResponse(f *testing.F) {
	const id = "0123456789abcdef0123456789abcdef"
	seedResponses(f, "prepare", id)
	f.Add([]byte(`{"protocolVersion":1,"requestId":"`+id+`","allowed":true}`), id)
	f.Fuzz(func(t *testing.T, body []byte, sentID string) {
		d, werr := decodePrepareResponse(body, sentID)
		// The shortcut takes only bytes the decode takes as the same allow.
		if isPrepareAllow(body, sentID) {
			if full, werr := decodePrepareAnswer(body, sentID); werr != nil || full != (Decision{Allowed: true}) {
				t.Fatalf("shortcut took %q for %q, the decode %+v %v", body, sentID, full, werr)
			}
		}
		allowed, reason := d.Allowed, d.Reason
		if werr != nil {
			if allowed || reason != "" || werr.Category == "" {
				t.Fatalf("failure %v came with allowed=%v reason=%q", werr, allowed, reason)
			}
			return
		}
		// A decision is only ever taken from one valid object that echoes the id.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("accepted %q: %v", body, err)
		}
		var got string
		if json.Unmarshal(m["requestId"], &got) != nil || got != sentID || string(m["protocolVersion"]) != "1" {
			t.Fatalf("accepted %q for request %q", body, sentID)
		}
		if allowed != (string(m["allowed"]) == "true") || (allowed && reason != "") {
			t.Fatalf("accepted %q as allowed=%v reason=%q", body, allowed, reason)
		}
		if reason != "" && reasonUnsafe(reason) != "" {
			t.Fatalf("accepted unsafe reason %q", reason)
		}
	})
}

func FuzzDecodeHandshakeResponse(f *testing.F) {
	const nonce = "0123456789abcdef0123456789abcdef"
	seedResponses(f, "handshake", nonce)
	f.Fuzz(func(t *testing.T, body []byte, sent string) {
		werr := decodeHandshakeResponse(body, sent)
		if werr != nil {
			if werr.Category == "" {
				t.Fatalf("failure without a category: %v", werr)
			}
			return
		}
		var m struct {
			ProtocolVersion int
			Nonce           string
			Capabilities    map[string]bool
		}
		if err := json.Unmarshal(body, &m); err != nil || m.ProtocolVersion != 1 || m.Nonce != sent ||
			len(m.Capabilities) != 1 || !m.Capabilities["prepare"] {
			t.Fatalf("accepted %q for nonce %q (%v)", body, sent, err)
		}
	})
}

// TestCanonicalArguments: one object has one digest however it is spelled,
// numbers kept as written; serve's decision log and the provider's audit log
// both hash with it, so their lines correlate.
func TestCanonicalArguments(t *testing.T) {
	digest := func(raw string) string {
		args, err := decodeProviderArguments(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("decodeProviderArguments(%q): %v", raw, err)
		}
		canon, d := canonicalArguments(args)
		if sum := sha256.Sum256(canon); d != hex.EncodeToString(sum[:]) {
			t.Errorf("digest of %q is not the SHA-256 of %q", raw, canon)
		}
		return d
	}
	a, b := digest(`{"b":1,"a":{"y":2.50,"x":"<"}}`), digest(` { "a" : {"x":"\u003c","y":2.50}, "b":1 } `)
	if a != b || len(a) != 64 {
		t.Errorf("digests of one object differ: %q %q", a, b)
	}
	if digest(`{"b":1,"a":{"y":2.5,"x":"<"}}`) == a {
		t.Errorf("2.50 and 2.5 hash alike; numbers must be kept as written")
	}
	args, _ := decodeProviderArguments(json.RawMessage(`{"b":1,"a":{"y":2.50,"x":"<"}}`))
	if canon, _ := canonicalArguments(args); string(canon) != `{"a":{"x":"\u003c","y":2.50},"b":1}` {
		t.Errorf("canonical form %s, want keys sorted, compact, numbers as written", canon)
	}
	for _, bad := range []string{``, `null`, `[]`, `"x"`, `1`, `{"a":1} {}`, `{`} {
		if _, err := decodeProviderArguments(json.RawMessage(bad)); err == nil {
			t.Errorf("decodeProviderArguments(%q) accepted a non-object", bad)
		}
	}
}

// Both ends accept application/json in any ASCII case, alone or with
// parameters, and nothing else: the rule as a regular expression, which
// folds case by Unicode's rules, but with ASCII letters only (the long s,
// U+017F, is not an s in a content type).
func FuzzWireContentType(f *testing.F) {
	for _, ct := range []string{
		"application/json", "Application/JSON", "application/json;charset=utf-8",
		"application/json ; charset=utf-8", "application/json\t;", "application/json\f\r\n;x",
		"application/json ", "application/jsonx", "application/json+x", " application/json",
		"application/jso", "", "text/json", "application/json,text/plain", "application/j\u017fon",
		"APPLICATION/JSON;", "application/json \v;",
	} {
		f.Add(ct)
	}
	rule := regexp.MustCompile(`(?i)^application/json(\s*;|$)`)
	f.Fuzz(func(t *testing.T, ct string) {
		want := rule.MatchString(ct)
		if want && bytes.ContainsFunc([]byte(ct[:min(len(ct), len(wireContentType)+1)]), func(r rune) bool { return r >= 0x80 }) {
			want = false // a non-ASCII letter folded to an ASCII one
		}
		if got := wireContentTypeOK(ct); got != want {
			t.Errorf("content type %q: accepted %v, want %v", ct, got, want)
		}
	})
}

// The provider's answer is json.Marshal's bytes, and the client's shortcut
// takes exactly its plain allow.
func TestAppendPrepareResponse(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	for _, r := range []prepareResponse{
		{ProtocolVersion: 1, RequestID: id, Decision: Decision{Allowed: true}},
		{ProtocolVersion: 1, RequestID: id, Decision: Decision{Reason: "no <rm> & \u2028 \xff \"quoted\""}},
		{ProtocolVersion: 1, RequestID: `odd "id"`, Decision: Decision{}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendPrepareResponse(nil, r); string(got) != string(want) {
			t.Errorf("answer %+v = %s, want %s", r, got, want)
		}
	}
	allow := `{"protocolVersion":1,"requestId":"` + id + `","allowed":true}`
	for _, tt := range []struct {
		body, id string
		want     bool
	}{
		{allow, id, true},
		{allow, strings.ToUpper(id), false},
		{allow, id[1:], false},
		{allow + " ", id, false},
		{strings.Replace(allow, "true", "false", 1), id, false},
		{strings.Replace(allow, `:1,`, `:2,`, 1), id, false},
		{`{"protocolVersion":1,"requestId":"","allowed":true}`, "", false},
	} {
		if got := isPrepareAllow([]byte(tt.body), tt.id); got != tt.want {
			t.Errorf("isPrepareAllow(%s, %q) = %v, want %v", tt.body, tt.id, got, tt.want)
		}
	}
}
