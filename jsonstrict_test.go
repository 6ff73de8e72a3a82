// jsonstrict_test.go checks the strict decoder's rules on each entry point:
// exact names, no duplicates, no trailing data, exact numbers.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type ShapeInner struct {
	Count int `json:"count"`
}

type shapeOuter struct {
	ShapeInner
	Name  string            `json:"name"`
	Tags  []string          `json:"tags"`
	Env   map[string]string `json:"env"`
	On    bool              `json:"on,omitempty"`
	Plain string
	Skip  string `json:"-"`
	quiet string
}

func TestJSONFields(t *testing.T) {
	var got []string
	for _, f := range jsonFields(reflect.TypeFor[shapeOuter]()) {
		got = append(got, f.name+":"+f.typ.String())
	}
	want := "count:int name:string tags:[]string env:map[string]string on:bool Plain:string"
	if strings.Join(got, " ") != want {
		t.Errorf("jsonFields = %q, want %q", got, want)
	}
}

// TestDecodeStrictExactNames: a top-level member spelled in another case
// than the struct's is refused by name, every time the type is decoded (its
// names are read once), an embedded struct's members and values holding
// other spellings, braces and quotes are accepted, and a nested object's
// names are left to its own decoder.
func TestDecodeStrictExactNames(t *testing.T) {
	for range 2 {
		for _, tt := range []struct{ in, err string }{
			{`{"count":1,"name":"n","tags":["}\"Name\":"],"env":{"Name":"{"},"on":true,"Plain":"p"}`, ""},
			{` {"name":"n"} `, ""},
			{`null`, ""},
			{`{"name":"n","Count":2}`, `unknown field "Count"`},
			{`{"NAME":"n"}`, `unknown field "NAME"`},
			{`{"plain":"p"}`, `unknown field "plain"`},
			{`{"name":"n","name":"m"}`, `duplicate field "name"`},
			{`{"Skip":"s"}`, `json: unknown field "Skip"`},
		} {
			var v shapeOuter
			err := decodeStrict([]byte(tt.in), &v)
			if got := fmt.Sprint(err); tt.err == "" && err != nil || tt.err != "" && got != tt.err {
				t.Errorf("decodeStrict(%s) = %v, want %q", tt.in, err, tt.err)
			}
		}
	}
}

// TestSettingsShape pins the shape errors of the settings walker
// (settings_schema.go), the strict decoder of the settings file.
func TestSettingsShape(t *testing.T) {
	for data, want := range map[string]string{
		`{"model":{"maxSessionTurns":3}}`:                   "",
		`{"model":{"maxSessionTurns":3}} {}`:                "more than one JSON value",
		`{"model":{"maxSessionTurns":3.0}}`:                 `key "model.maxSessionTurns": want an integer, got 3.0`,
		`{"model":{"maxSessionTurns":"3"}}`:                 `key "model.maxSessionTurns": want an integer, got string`,
		`{"model":{"maxSessionTurns":9999999999999999999}}`: `key "model.maxSessionTurns": want an integer, got 9999999999999999999`,
		`{"model":{"name":"a","name":"b"}}`:                 `duplicate key "model.name"`,
		`[]`:                                                "want an object, got array",
		`{"model":`:                                         "invalid JSON at line 1, column 10: unexpected end of JSON input",
	} {
		_, err := parseSettings([]byte(data))
		if got := errText(err); got != want {
			t.Errorf("parseSettings(%s) = %q, want %q", data, got, want)
		}
	}
}

func TestDecodeObject(t *testing.T) {
	m, err := decodeObject([]byte(` {"n": 12345678901234567890.5} `))
	if err != nil || m["n"] != json.Number("12345678901234567890.5") {
		t.Errorf("decodeObject = %v, %v; want the number as written", m, err)
	}
	for _, data := range []string{`null`, `[]`, `{} {}`, `{}x`, `"s"`, ``} {
		if _, err := decodeObject([]byte(data)); err == nil {
			t.Errorf("decodeObject(%q) accepted", data)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// tokenWireObject is a json.Decoder token walk, the oracle decodeWireObject
// must agree with on every valid JSON input.
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

// decodeObject's walk for flat objects of plain strings reads exactly what
// encoding/json's decoder reads, and leaves it everything else.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{
		`{"file_path":"out.txt","content":"x"}`, ` { "a" : "b" } `, `{}`, `{"a":"b","a":"c"}`,
		`{"a":"\u00e9"}`, `{"a\u0062":"c"}`, `{"a":1}`, `{"a":"b"} x`, `{"a":"` + "\xff" + `"}`, `null`,
		`{"A":"b","a":"c"}`, `{"a":"b",}`, `{"a":"b"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		flat, ok := decodeFlatStrings(data)
		if !ok {
			return
		}
		want, err := decodeObjectJSON(data)
		if err != nil || !reflect.DeepEqual(flat, want) {
			t.Fatalf("walk read %q as %v; encoding/json %v, %v", data, flat, want, err)
		}
	})
}
