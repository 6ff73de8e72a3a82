// jsonstrict_decode.go owns the one strict JSON decoder into Go values
// that every reader of another process's bytes, and of the settings file,
// uses (decodeStrict): member names spelled exactly, none given twice, no
// trailing data; and the one reading of json tags (jsonFields). It steps on
// jsonstrict.go's walk.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// decodeStrict decodes exactly one JSON value from data into v, rejecting
// unknown fields, a member name given twice in one object, and trailing
// data. Every decoder of another process's bytes goes through it.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := decodeOne(dec, v); err != nil {
		return err
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
	// decodeStrict has checked data for duplicates and trailing bytes:
	// only a name encoding/json matched ignoring its case is left to find.
	names := memberNames(t.Elem())
	w := wireWalk{data: data}
	return w.object(func(key string) error {
		if !slices.Contains(names, key) {
			return fmt.Errorf("unknown field %q", key)
		}
		w.value()
		return nil
	})
}

// memberNamesOf holds each struct type's member names (reflect.Type to
// []string), read from its tags once: a type's tags never change.
var memberNamesOf sync.Map

// memberNames is the names of jsonFields(t), t a struct type.
func memberNames(t reflect.Type) []string {
	if names, ok := memberNamesOf.Load(t); ok {
		return names.([]string)
	}
	var names []string
	for _, f := range jsonFields(t) {
		names = append(names, f.name)
	}
	stored, _ := memberNamesOf.LoadOrStore(t, names)
	return stored.([]string)
}

// jsonField is one member encoding/json decodes into a struct: its name
// and its Go type.
type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields is the one reading of json tags: the members of struct type t,
// an untagged embedded struct's members among them.
func jsonFields(t reflect.Type) []jsonField {
	var fields []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct:
			fields = append(fields, jsonFields(f.Type)...)
		case name == "":
			fields = append(fields, jsonField{f.Name, f.Type})
		default:
			fields = append(fields, jsonField{name, f.Type})
		}
	}
	return fields
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
		return errStrictEnd
	}
	switch w.data[w.i] {
	case '{':
		seen := map[string]bool{}
		return w.object(func(key string) error {
			if seen[key] {
				return &duplicateError{key: key}
			}
			seen[key] = true
			return within(w.noDuplicates(), "."+key)
		})
	case '[':
		w.i++
		for n := 0; ; n++ {
			if more, err := w.nextElement(n); !more || err != nil {
				return err
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
