// jsonstrict.go owns the one walk over raw bytes (wireWalk) that every
// reader of another process's bytes, and of the settings file, steps on;
// the strict decode into Go values built on it (decodeStrict) is in
// jsonstrict_decode.go. The walk's objects are all walked by nextMember: over JSON already checked,
// finding bounds only (decodeWireObject, duplicateMember, exactNames), or
// checking as it goes without building a Go value, as encoding/json reads
// JSON, for bytes forwarded as they came (strictMembers), or by json.Valid's
// rules only, for a JSON-RPC line whose members are then read each on its
// own (syntaxMembers).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"
)

// decodeObject decodes data, exactly one JSON object, into its members,
// numbers kept as written (json.Number) so none is rounded.
func decodeObject(data []byte) (map[string]any, error) {
	if m, ok := decodeFlatStrings(data); ok {
		return m, nil
	}
	return decodeObjectJSON(data)
}

// decodeFlatStrings is decodeObject of an object whose members all hold a
// string without an escape, as a tool call's arguments mostly are, read by
// one strict walk instead of encoding/json's decoder; ok is false for any
// other bytes, which decodeObjectJSON decodes (FuzzDecodeObject holds the
// two to one reading).
func decodeFlatStrings(data []byte) (m map[string]any, ok bool) {
	w := wireWalk{data: data, check: walkStrict}
	m = make(map[string]any, flatStringsMembers)
	err := w.object(func(key string) error {
		if _, dup := m[key]; dup || w.i >= len(w.data) || w.data[w.i] != '"' {
			return errNotFlat
		}
		s, err := w.str()
		if err != nil || bytes.IndexByte(s, '\\') >= 0 {
			return errNotFlat
		}
		m[key] = string(s)
		return nil
	})
	w.space()
	return m, err == nil && w.i == len(data)
}

// flatStringsMembers sizes decodeFlatStrings' map for a tool call's usual
// arguments.
const flatStringsMembers = 4

// errNotFlat ends decodeFlatStrings' walk at a member it leaves to
// encoding/json.
var errNotFlat = errors.New("not a flat object of plain strings")

// decodeObjectJSON is decodeObject by encoding/json's decoder.
func decodeObjectJSON(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := decodeOne(dec, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, shapeTypeError("", "an object", "null")
	}
	return m, nil
}

// decodeOne decodes the one JSON value dec reads into v: nothing may follow.
func decodeOne(dec *json.Decoder, v any) error {
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

// decodeWireObject splits one JSON object from data into its members, whose
// keys must be spelled exactly as one of allowed and appear at most once;
// encoding/json alone would accept "Allowed" for "allowed" and let a
// duplicate key win. It is DisallowUnknownFields with exact spelling, for
// objects whose members are all kept raw. data must be valid JSON
// (json.Valid): the walk relies on it and only finds the members' bounds.
// The values alias data. It walks the bytes once and builds no error text
// for a member it accepts, so it stays cheap on every JSON-RPC envelope.
func decodeWireObject(data []byte, allowed ...string) (map[string]json.RawMessage, error) {
	w := wireWalk{data: data}
	m := make(map[string]json.RawMessage, len(allowed))
	err := w.object(func(key string) error {
		if _, dup := m[key]; dup {
			return fmt.Errorf("duplicate field %q", key)
		}
		if !slices.Contains(allowed, key) {
			return fmt.Errorf("unknown field %q", key)
		}
		m[key] = w.value()
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.space()
	if w.i != len(data) {
		return nil, errors.New("trailing data after the object")
	}
	return m, nil
}

// strictMembers checks data, one JSON object, as checkWireArguments checks
// arguments (without their bound), and sets out[i] to the value of the member
// named names[i]; a member of another name, spelled otherwise, or given
// twice is an error. The values alias data.
func strictMembers(data []byte, names []string, out []json.RawMessage) error {
	return strictMembersBut(data, names, out, -1)
}

// strictMembersBut is strictMembers but for the member named names[bounded],
// whose value it only bounds: its caller checks it strictly, so that a
// large member is walked once.
func strictMembersBut(data []byte, names []string, out []json.RawMessage, bounded int) error {
	w := wireWalk{data: data, check: walkStrict}
	named, err := w.members(names, out, bounded)
	if named != nil {
		return named
	}
	return err
}

// syntaxMembers is strictMembers by the rules of json.Valid instead
// (walkSyntax), for a JSON-RPC envelope, whose members are then checked
// each by its reader: valid is false when data is not JSON. A member
// refused by name does not end the walk, since bytes that are not JSON
// anywhere outrank it; named is the first one.
func syntaxMembers(data []byte, names []string, out []json.RawMessage) (named error, valid bool) {
	w := wireWalk{data: data, check: walkSyntax}
	named, err := w.members(names, out, -1)
	return named, err == nil
}

// members checks the object at the walk's position to its end, setting
// out[i] to the value of the member named names[i]. named is the first
// member refused by name (of another name, spelled otherwise, or given
// twice); a strict walk stops there, one that checks syntax only walks on.
// err is anything else that ends the walk. The value of names[bounded], if
// any, is only bounded, not checked.
func (w *wireWalk) members(names []string, out []json.RawMessage, bounded int) (named, err error) {
	if err := w.open(); err != nil {
		return nil, err
	}
	for n := 0; ; n++ {
		key, more, err := w.nextMember(n, true)
		if err != nil {
			return named, err
		}
		if !more {
			break
		}
		k := slices.Index(names, string(key))
		if named == nil {
			switch {
			case k < 0:
				named = fmt.Errorf("unknown field %q", key)
			case out[k] != nil:
				named = fmt.Errorf("duplicate field %q", key)
			}
			if named != nil && w.check == walkStrict {
				return named, nil
			}
		}
		start := w.i
		if k >= 0 && k == bounded {
			if len(w.value()) == 0 { // a member with no value: not JSON
				return named, fmt.Errorf("field %q: malformed value", key)
			}
		} else if err := w.checked(1); err != nil {
			return named, fmt.Errorf("field %q: %w", key, err)
		}
		if named == nil {
			out[k] = w.data[start:w.i]
		}
	}
	w.space()
	if w.i != len(w.data) {
		return named, errors.New("trailing data after the object")
	}
	return named, nil
}

// object walks the object at the walk's position, calling member with each
// name and the walk at its value, which member must move past.
func (w *wireWalk) object(member func(key string) error) error {
	return w.objectBytes(func(key []byte) error { return member(string(key)) })
}

// objectBytes is object with each name as bytes, unescaped: the bytes as
// written where they need no unescaping (aliasing the walk's data, valid
// only for the call), so that a caller comparing names allocates nothing.
func (w *wireWalk) objectBytes(member func(key []byte) error) error {
	if err := w.open(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		key, more, err := w.nextMember(n, true)
		if err != nil || !more {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
	}
}

// wireWalk walks the JSON in data from i on, one value after another; what
// it checks of the bytes it crosses is its check. Every reader of raw JSON
// bytes walks with it, and every object is walked by nextMember.
type wireWalk struct {
	data  []byte
	i     int
	check walkCheck
	// keys holds the member names of the objects open now, innermost
	// last, for a walk that refuses a name given twice (walkStrict).
	keys [][]byte
}

// walkCheck is what a walk checks of the bytes it crosses.
type walkCheck uint8

const (
	// walkBounds, the zero walk's, checks nothing: data is valid JSON
	// (json.Valid) and the walk finds the bounds of values. On other input
	// it stops early, never panics.
	walkBounds walkCheck = iota
	// walkSyntax checks what json.Valid checks and no more: a string may
	// hold any byte but a control character, and a name may be given twice
	// below the top level (members still refuses it there).
	walkSyntax
	// walkStrict checks JSON as encoding/json reads it, plus what
	// jsonstrict.go refuses: invalid UTF-8 and a member name given twice in
	// one object. It builds no Go value: names are compared as the bytes
	// they are (unescaped only when written with an escape).
	walkStrict
)

// maxJSONDepth bounds the nesting a checking walk accepts: encoding/json's
// own limit, so that the decoders read whatever a walk accepts.
const maxJSONDepth = 10000

// strictWalkLinear is how many names an object's duplicate check compares
// one by one; an object with more builds a set.
const strictWalkLinear = 16

var (
	errStrictEnd       = errors.New("unexpected end of JSON")
	errMalformedObject = errors.New("malformed object")
	errMalformedArray  = errors.New("malformed array")
)

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

// open moves past white space and the '{' of an object, or says what
// stands there instead.
func (w *wireWalk) open() error {
	w.space()
	if !w.eat('{') {
		return fmt.Errorf("%s instead of an object", w.describe())
	}
	return nil
}

// nextMember moves to the value of the next member of the object the walk
// is in, after n members of it, and returns the member's name (key): as
// encoding/json reads it when named, else as written, only checked. more
// is false at the object's end, which it moves past. It is the one walk of
// an object's members.
func (w *wireWalk) nextMember(n int, named bool) (key []byte, more bool, err error) {
	w.space()
	if w.eat('}') {
		return nil, false, nil
	}
	if n > 0 && !w.eat(',') {
		return nil, false, errMalformedObject
	}
	w.space()
	if key, err = w.key(named); err != nil {
		return nil, false, err
	}
	w.space()
	if !w.eat(':') {
		return nil, false, errMalformedObject
	}
	w.space()
	return key, true, nil
}

// nextElement moves to the next element of the array the walk is in, after
// n elements of it; more is false at the array's end, which it moves past.
func (w *wireWalk) nextElement(n int) (more bool, err error) {
	w.space()
	if w.eat(']') {
		return false, nil
	}
	if n > 0 && !w.eat(',') {
		return false, errMalformedArray
	}
	w.space()
	return true, nil
}

// key reads a member name and returns the bytes between its quotes
// (aliasing the walk's data) or, when named and the name needs unescaping
// (it holds an escape or, where the walk lets a string hold them, bytes that
// are not UTF-8), the name as encoding/json reads it.
func (w *wireWalk) key(named bool) ([]byte, error) {
	start := w.i
	if w.i >= len(w.data) || w.data[w.i] != '"' {
		return nil, errMalformedObject
	}
	inner, err := w.str()
	if err != nil {
		return nil, err
	}
	if !named || bytes.IndexByte(inner, '\\') < 0 && (w.check == walkStrict || utf8.Valid(inner)) {
		return inner, nil
	}
	var key string
	if err := json.Unmarshal(w.data[start:w.i], &key); err != nil {
		return nil, fmt.Errorf("member name: %w", err)
	}
	return []byte(key), nil
}

// value returns the next value as written and moves past it, finding its
// bounds only (walkBounds). Like str, it steps in a local index; inside a
// container only quotes and brackets count, so it skips to the next.
func (w *wireWalk) value() json.RawMessage {
	data, start := w.data, w.i
	i, depth := start, 0
	if i < len(data) && (data[i] == '{' || data[i] == '[') {
		for ; i < len(data); i++ {
			for i < len(data) && !jsonNesting[data[i]] {
				i++
			}
			switch {
			case i == len(data):
			case data[i] == '"':
				i = stringEnd(data, i+1)
			case data[i] == '{' || data[i] == '[':
				depth++
			default: // a closing bracket
				if depth--; depth == 0 {
					w.i = i + 1
					return data[start:w.i]
				}
			}
		}
		w.i = len(data)
		return data[start:]
	}
	for i < len(data) {
		switch data[i] {
		case '"':
			i = stringEnd(data, i+1)
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				w.i = i
				return data[start:i]
			}
			depth--
		case ',', ' ', '\t', '\r', '\n', ':':
			if depth == 0 {
				w.i = i
				return data[start:i]
			}
		}
		i++
		if depth == 0 && i > start && (data[start] == '"' || data[start] == '{' || data[start] == '[') {
			break
		}
	}
	w.i = min(i, len(data))
	return data[start:w.i]
}

// jsonNesting marks the bytes that open or close a container or a string.
var jsonNesting = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// stringEnd is the index of the quote that ends the string whose content
// starts at i in checked JSON, or len(data): the first quote after an even
// run of backslashes. It looks at the first bytes itself, since most
// strings are short, then finds the quote with bytes.IndexByte, which reads
// a long string many bytes at a time.
func stringEnd(data []byte, i int) int {
	for {
		j, stop := i, min(i+stringEndScan, len(data))
		for j < stop && data[j] != '"' {
			j++
		}
		if j == stop {
			q := bytes.IndexByte(data[stop:], '"')
			if q < 0 {
				return len(data)
			}
			j = stop + q
		}
		n := 0
		for n < j && data[j-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return j
		}
		i = j + 1
	}
}

// stringEndScan is how many bytes stringEnd looks at before it calls
// bytes.IndexByte: a member name's or a short value's length.
const stringEndScan = 24

// checked checks one value at the walk's position, inside depth
// containers, and moves past it (walkSyntax, walkStrict).
func (w *wireWalk) checked(depth int) error {
	if w.i >= len(w.data) {
		return errStrictEnd
	}
	switch c := w.data[w.i]; {
	case c == '{':
		return w.checkedObject(depth + 1)
	case c == '[':
		return w.checkedArray(depth + 1)
	case c == '"':
		_, err := w.str()
		return err
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return w.number()
	default:
		return fmt.Errorf("invalid character %q at byte %d", c, w.i)
	}
}

func (w *wireWalk) checkedObject(depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested more than %d deep", maxJSONDepth)
	}
	w.i++ // '{'
	base := len(w.keys)
	defer func() { w.keys = w.keys[:base] }()
	var set map[string]struct{} // the names, once there are many
	for n := 0; ; n++ {
		// Below the top level, a walk of the syntax only checks a name:
		// it may repeat.
		key, more, err := w.nextMember(n, w.check == walkStrict)
		if err != nil || !more {
			return err
		}
		if w.check == walkStrict {
			if set, err = w.uniqueKey(key, base, set); err != nil {
				return err
			}
		}
		if err := w.checked(depth); err != nil {
			return err
		}
	}
}

// uniqueKey refuses key, a member name of the object whose names start at
// w.keys[base], when it was given before in it; set holds the names once
// there are many, and is returned, made when they become many.
func (w *wireWalk) uniqueKey(key []byte, base int, set map[string]struct{}) (map[string]struct{}, error) {
	if set != nil {
		if _, dup := set[string(key)]; dup {
			return set, fmt.Errorf("duplicate field %q", key)
		}
		set[string(key)] = struct{}{}
		return set, nil
	}
	for _, k := range w.keys[base:] {
		if bytes.Equal(k, key) {
			return set, fmt.Errorf("duplicate field %q", key)
		}
	}
	w.keys = append(w.keys, key)
	if len(w.keys)-base > strictWalkLinear {
		set = make(map[string]struct{}, 2*strictWalkLinear)
		for _, k := range w.keys[base:] {
			set[string(k)] = struct{}{}
		}
		w.keys = w.keys[:base]
	}
	return set, nil
}

func (w *wireWalk) checkedArray(depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested more than %d deep", maxJSONDepth)
	}
	w.i++ // '['
	for n := 0; ; n++ {
		if more, err := w.nextElement(n); !more || err != nil {
			return err
		}
		if err := w.checked(depth); err != nil {
			return err
		}
	}
}

func (w *wireWalk) literal(lit string) error {
	if !bytes.HasPrefix(w.data[w.i:], []byte(lit)) {
		return fmt.Errorf("invalid literal at byte %d", w.i)
	}
	w.i += len(lit)
	return nil
}

func (w *wireWalk) digits() int {
	n := 0
	for w.i < len(w.data) && w.data[w.i] >= '0' && w.data[w.i] <= '9' {
		w.i++
		n++
	}
	return n
}

func (w *wireWalk) number() error {
	start := w.i
	w.eat('-')
	switch {
	case w.eat('0'):
	case w.digits() == 0:
		return fmt.Errorf("invalid number at byte %d", start)
	}
	if w.eat('.') && w.digits() == 0 {
		return fmt.Errorf("invalid number at byte %d", start)
	}
	if w.eat('e') || w.eat('E') {
		if !w.eat('+') {
			w.eat('-')
		}
		if w.digits() == 0 {
			return fmt.Errorf("invalid number at byte %d", start)
		}
	}
	return nil
}

// str checks the string at the walk's position and returns what is
// between its quotes as written; a walk that checks nothing (walkBounds)
// reads it as walkSyntax does. It steps in a local index, the walk's
// hottest loop, and moves the walk only past a string it accepts.
func (w *wireWalk) str() ([]byte, error) {
	data, start := w.data, w.i
	i := start + 1 // past the opening quote
	plain := &strPlainUTF8
	if w.check != walkStrict {
		plain = &strPlainAny
	}
	for i < len(data) {
		for i < len(data) && plain[data[i]] {
			i++
		}
		if i >= len(data) {
			break
		}
		switch c := data[i]; {
		case c == '"':
			w.i = i + 1
			return data[start+1 : i], nil
		case c == '\\':
			i++
			if i >= len(data) {
				return nil, errStrictEnd
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(data) {
					return nil, errStrictEnd
				}
				for _, h := range data[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return nil, fmt.Errorf("invalid \\u escape at byte %d", i-1)
					}
				}
				i += 5
			default:
				return nil, fmt.Errorf("invalid escape at byte %d", i-1)
			}
		case c < 0x20:
			return nil, fmt.Errorf("control character in a string at byte %d", i)
		case c < utf8.RuneSelf || w.check != walkStrict:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, fmt.Errorf("invalid UTF-8 at byte %d", i)
			}
			i += size
		}
	}
	return nil, errStrictEnd
}

// strPlainUTF8 and strPlainAny are the bytes a string holds as they are,
// with nothing to check: printable ASCII but the quote and the backslash;
// and, when only the syntax is checked, any byte from 0x80 on as well.
var strPlainUTF8, strPlainAny = strPlainBytes(false), strPlainBytes(true)

func strPlainBytes(high bool) (plain [256]bool) {
	for c := range plain {
		plain[c] = c >= 0x20 && c != '"' && c != '\\' && (c < utf8.RuneSelf || high)
	}
	return plain
}

// shapeTypeError is the settings walker's (settings_schema.go) error for
// a value of the wrong JSON type at path at.
func shapeTypeError(at, want, got string) error {
	if at == "" {
		return fmt.Errorf("want %s, got %s", want, got)
	}
	return fmt.Errorf("key %q: want %s, got %s", at, want, got)
}

// maxErrorQuote bounds another process's bytes quoted in an error message,
// so a peer cannot make a log line or a reply as large as its message.
const maxErrorQuote = 200

// truncateForError shortens another process's bytes for an error message.
func truncateForError(b []byte) string {
	if len(b) > maxErrorQuote {
		return string(b[:maxErrorQuote]) + "..."
	}
	return string(b)
}

// isJSONNull reports whether v, one JSON value as a strict walk returned
// it, is null.
func isJSONNull(v json.RawMessage) bool { return string(v) == "null" }
