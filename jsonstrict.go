// jsonstrict.go owns the one strict JSON decoder every reader of another
// process's bytes uses, and the settings file: member names spelled exactly,
// none given twice, no trailing data, numbers kept as written.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeStrict decodes exactly one JSON value from data into v, rejecting
// unknown fields, a member name given twice in one object, and trailing
// data. Every decoder of another process's bytes goes through it.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("trailing data after JSON value")
	}
	if err := duplicateMember(data); err != nil {
		return err
	}
	return exactNames(data, v)
}

// exactNames refuses a top-level member of a struct's object whose name is
// not spelled exactly as one of the struct's: encoding/json matches names
// ignoring case, so {"decision":"deny","Decision":"allow"} would decode as
// allow. Nested structs that carry decisions are decoded on their own.
func exactNames(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil // null: encoding/json leaves the struct alone
	}
	_, err := decodeWireObject(data, jsonNames(t.Elem())...)
	return err
}

// jsonNames are the member names encoding/json decodes into struct type t.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct:
			names = append(names, jsonNames(f.Type)...)
		case name == "":
			names = append(names, f.Name)
		default:
			names = append(names, name)
		}
	}
	return names
}

// duplicateMember reports the first member name given twice in one object,
// at any depth of data, which must be valid JSON. encoding/json lets the
// last one win: a policy rule could say deny, then allow.
func duplicateMember(data []byte) error {
	w := wireWalk{data: data}
	return w.noDuplicates()
}

// duplicateError names a member given twice and where: "rules[0]".
type duplicateError struct {
	key string
	at  string // built on the way out, so a clean walk builds nothing
}

func (e *duplicateError) Error() string {
	if e.at == "" {
		return fmt.Sprintf("duplicate field %q", e.key)
	}
	return fmt.Sprintf("duplicate field %q in %s", e.key, strings.TrimPrefix(e.at, "."))
}

// within prefixes the path of a duplicate found inside the value at seg.
func within(err error, seg string) error {
	if d, ok := err.(*duplicateError); ok {
		d.at = seg + d.at
	}
	return err
}

// noDuplicates walks one value. Any input ends the walk: each step either
// moves forward or returns.
func (w *wireWalk) noDuplicates() error {
	w.space()
	if w.i >= len(w.data) {
		return errors.New("unexpected end of JSON")
	}
	switch w.data[w.i] {
	case '{':
		w.i++
		seen := map[string]bool{}
		for w.space(); !w.eat('}'); w.space() {
			if len(seen) > 0 && !w.eat(',') {
				return errors.New("malformed object")
			}
			w.space()
			key, err := w.key()
			if err != nil {
				return err
			}
			if seen[key] {
				return &duplicateError{key: key}
			}
			seen[key] = true
			w.space()
			if !w.eat(':') {
				return errors.New("malformed object")
			}
			if err := w.noDuplicates(); err != nil {
				return within(err, "."+key)
			}
		}
	case '[':
		w.i++
		for n := 0; ; n++ {
			w.space()
			if w.eat(']') {
				break
			}
			if n > 0 && !w.eat(',') {
				return errors.New("malformed array")
			}
			if err := w.noDuplicates(); err != nil {
				return within(err, "["+strconv.Itoa(n)+"]")
			}
		}
	default:
		if len(w.value()) == 0 {
			return errors.New("malformed value")
		}
	}
	return nil
}

// decodeWireObject splits one JSON object from data into its members, whose
// keys must be spelled exactly as one of allowed and appear at most once;
// encoding/json alone would accept "Allowed" for "allowed" and let a
// duplicate key win. It is DisallowUnknownFields with exact spelling, for
// objects whose members are all kept raw. data must be valid JSON
// (json.Valid): the walk relies on it and only finds the members' bounds.
// The values alias data. It replaced a json.Decoder walk, which built and
// dropped an error text for every member and cost a third of a provider
// decision; on the JSON-RPC envelope it is a fifth of a json.Decoder's cost.
func decodeWireObject(data []byte, allowed ...string) (map[string]json.RawMessage, error) {
	w := wireWalk{data: data}
	w.space()
	if !w.eat('{') {
		return nil, fmt.Errorf("%s instead of an object", w.describe())
	}
	m := make(map[string]json.RawMessage, len(allowed))
	w.space()
	for !w.eat('}') {
		if len(m) > 0 && !w.eat(',') {
			return nil, errors.New("malformed object")
		}
		w.space()
		key, err := w.key()
		if err != nil {
			return nil, err
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("duplicate field %q", key)
		}
		if !slices.Contains(allowed, key) {
			return nil, fmt.Errorf("unknown field %q", key)
		}
		w.space()
		if !w.eat(':') {
			return nil, errors.New("malformed object")
		}
		w.space()
		m[key] = w.value()
		w.space()
	}
	w.space()
	if w.i != len(data) {
		return nil, errors.New("trailing data after the object")
	}
	return m, nil
}

// wireWalk walks valid JSON; on other input it stops early, never panics.
type wireWalk struct {
	data []byte
	i    int
}

func (w *wireWalk) space() {
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case ' ', '\t', '\r', '\n':
			w.i++
		default:
			return
		}
	}
}

func (w *wireWalk) eat(c byte) bool {
	if w.i < len(w.data) && w.data[w.i] == c {
		w.i++
		return true
	}
	return false
}

// describe names the value at the walk's position for an error.
func (w *wireWalk) describe() string {
	if w.i >= len(w.data) {
		return "nothing"
	}
	switch c := w.data[w.i]; {
	case c == 'n':
		return "null"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	}
	return "a number"
}

// key reads one member name, unescaped.
func (w *wireWalk) key() (string, error) {
	raw := w.value()
	if len(raw) < 2 || raw[0] != '"' {
		return "", errors.New("malformed object")
	}
	inner := raw[1 : len(raw)-1]
	if !bytes.ContainsAny(inner, "\\") && utf8.Valid(inner) {
		return string(inner), nil
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", fmt.Errorf("member name: %w", err)
	}
	return key, nil
}

// value returns the next value as written and moves past it.
func (w *wireWalk) value() json.RawMessage {
	start, depth := w.i, 0
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case '"':
			w.i++
			for w.i < len(w.data) && w.data[w.i] != '"' {
				if w.data[w.i] == '\\' {
					w.i++
				}
				w.i++
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return w.data[start:w.i]
			}
			depth--
		case ',', ' ', '\t', '\r', '\n', ':':
			if depth == 0 {
				return w.data[start:w.i]
			}
		}
		w.i++
		if depth == 0 && w.i > start && (w.data[start] == '"' || w.data[start] == '{' || w.data[start] == '[') {
			return w.data[start:min(w.i, len(w.data))]
		}
	}
	return w.data[start:min(w.i, len(w.data))]
}
