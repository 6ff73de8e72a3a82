// jsonstrict_test.go checks the strict decoder's rules on each entry point:
// exact names, no duplicates, no trailing data, exact numbers.
package main

import (
	"encoding/json"
	"reflect"
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

func TestCheckShape(t *testing.T) {
	typ := reflect.TypeFor[ShapeInner]()
	for data, want := range map[string]string{
		`{"count":3}`:             "",
		`{"Count":3}`:             `unknown key "Count"`,
		`{"count":3,"count":4}`:   `duplicate key "count"`,
		`{"count":3} {}`:          "more than one JSON value",
		`{"count":3.0}`:           `key "count": want an integer, got 3.0`,
		`{"count":"3"}`:           `key "count": want an integer, got string`,
		`{"count":9999999999999}`: `key "count": want an integer, got 9999999999999`,
		`[]`:                      "want an object, got array",
		`{"count":`:               "invalid JSON at byte 9: unexpected EOF",
	} {
		err := checkShape([]byte(data), typ, 10)
		if got := errText(err); got != want {
			t.Errorf("checkShape(%s) = %q, want %q", data, got, want)
		}
	}
	err := checkShape([]byte(`{"name":"01234567890"}`), reflect.TypeFor[shapeOuter](), 10)
	if got, want := errText(err), `key "name": string longer than 10 bytes`; got != want {
		t.Errorf("long string: %q, want %q", got, want)
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
