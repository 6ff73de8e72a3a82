// guard_wire_test.go fuzzes the client's decoders of a provider's bytes:
// the two response decoders and the object walk beneath them.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
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
	f.Fuzz(func(t *testing.T, body []byte, sentID string) {
		d, werr := decodePrepareResponse(body, sentID)
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

// tokenWireObject is the json.Decoder token walk decodeWireObject replaced,
// kept as the oracle it must agree with on every valid JSON input.
func tokenWireObject(data []byte, allowed ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not an object")
	}
	m := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if _, dup := m[key]; dup || !slices.Contains(allowed, key) {
			return nil, errors.New("duplicate or unknown field")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		m[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data")
	}
	return m, nil
}

func FuzzWireObject(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[1,{"c":"}"}],"\u0063":null}`, `{ "a" : "x\"y" , "b" : {} }`, `{"a":1,"a":2}`,
		`{"A":1}`, `{}`, ` {"b":true} `, `[1]`, `"a"`, `null`, `{"a":"\\"}`, "{\"b\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeWireObject(data, "a", "b", "c")
		if !json.Valid(data) {
			return // callers check validity first; reaching here without a panic is the test
		}
		want, werr := tokenWireObject(data, "a", "b", "c")
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: walk says %v, token walk says %v", data, err, werr)
		}
		if err == nil && !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("%q: walk found %q, token walk %q", data, got, want)
		}
	})
}

// tokenDuplicate is a json.Decoder token walk that finds a member name given
// twice in one object: the oracle of FuzzDuplicateMember.
func tokenDuplicate(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return false, err
			}
			key, _ := k.(string)
			if seen[key] {
				return true, nil
			}
			seen[key] = true
			if dup, err := tokenDuplicate(dec); dup || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if dup, err := tokenDuplicate(dec); dup || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token()
	}
	return false, err
}

func FuzzDuplicateMember(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `[{"x":1},{"x":1}]`, `{"a":[{"c":1,"\u0063":2}]}`,
		`{"rules":[{"decision":"deny","decision":"allow"}]}`, `{"a":"}","b":"{\"a\":1,\"a\":2}"}`, `"s"`, `[]`, `1`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := duplicateMember(data)
		if !json.Valid(data) {
			return // decodeStrict calls it after a successful decode only; no panic or hang is the test
		}
		want, werr := tokenDuplicate(json.NewDecoder(bytes.NewReader(data)))
		if werr != nil {
			t.Fatalf("%q: oracle failed on valid JSON: %v", data, werr)
		}
		if (err != nil) != want {
			t.Fatalf("%q: walk says %v, token walk says duplicate=%v", data, err, want)
		}
	})
}
