// jsonwrite.go owns the JSON written by hand: the primitives every encoder
// that appends bytes uses, on the wire paths whose output must be byte for
// byte encoding/json's and is built without reflection (a provider request,
// a JSON-RPC line, a tool update, a decision): a string quoted as
// encoding/json quotes it, a value encoded by encoding/json without HTML
// escaping, raw JSON compacted or HTML-escaped, and a map's members in key
// order.
package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it (with escapeHTML as json.Marshal, without as an Encoder after
// SetEscapeHTML(false)): invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string, escapeHTML bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendEncoded appends v as encoding/json has it without HTML escaping.
func appendEncoded(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil // Encode ends the value with a newline
}

// appendCompactJSON appends raw compacted, or fails if it is not one valid
// JSON value.
func appendCompactJSON(b []byte, raw []byte) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, err
	}
	return buf.Bytes(), nil
}

// htmlEscaped is raw as json.Marshal has it: <, > and & escaped inside
// strings (they appear nowhere else in JSON). raw itself when none appears.
func htmlEscaped(raw []byte) []byte {
	if !bytes.ContainsAny(raw, "<>&") {
		return raw
	}
	var b bytes.Buffer
	json.HTMLEscape(&b, raw)
	return b.Bytes()
}

// appendJSONValue appends v as the wire's encoder has it: map members in key
// order, no HTML escaping. The shapes arguments and outputs take are
// appended directly, any other by the encoder itself.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendJSONString(b, v, false), nil
	case bool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case map[string]any:
		return appendSortedObject(b, v, appendJSONValue)
	case map[string]string:
		return appendSortedObject(b, v, func(b []byte, s string) ([]byte, error) { return appendJSONString(b, s, false), nil })
	}
	return appendEncoded(b, v)
}

// appendSortedObject appends m as the encoder writes a map: members in key
// order, a nil map as null; value appends each member's value.
func appendSortedObject[V any](b []byte, m map[string]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k, false)
		b = append(b, ':')
		var err error
		if b, err = value(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}
