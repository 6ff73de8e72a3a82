// jsonsyntax.go owns the place of a JSON syntax error in an operator's file
// (a policy, a settings file): its line and column as an editor counts them,
// so the error points at the character to fix (DESIGN.md §11).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// jsonSyntaxCheck returns nil when data is one well-formed JSON value, else
// an error naming the line and column of the fault in orig, the file as
// written: data is orig itself, or orig after a pre-pass that keeps every
// offset (blankJSONC). An input that ends too early points just after its
// last character that is not white space.
func jsonSyntaxCheck(orig, data []byte) error {
	var raw json.RawMessage
	var se *json.SyntaxError
	// A second value after the first is left to the decoders, which name it.
	if err := json.Unmarshal(data, &raw); !errors.As(err, &se) || strings.HasSuffix(se.Error(), "after top-level value") {
		return nil
	}
	at := int(se.Offset) - 1 // the scanner counts the offending byte
	if se.Error() == "unexpected end of JSON input" {
		at = len(bytes.TrimRight(data, " \t\r\n"))
	}
	line, col := lineColumn(orig, at)
	return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, se.Error())
}

// lineColumn returns the 1-based line and column of the byte at offset in
// data; a column counts characters, and a leading byte order mark none.
func lineColumn(data []byte, offset int) (line, col int) {
	offset = max(0, min(offset, len(data)))
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	start := bytes.LastIndexByte(before, '\n') + 1
	if start == 0 && bytes.HasPrefix(before, []byte("\uFEFF")) {
		start = len("\uFEFF")
	}
	return line, 1 + utf8.RuneCount(before[start:])
}
