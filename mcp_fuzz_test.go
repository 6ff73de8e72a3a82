package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzMCPEventReader: whatever a remote server streams, the reader ends
// (no event without an error or the stream's end), never returns data over
// its bound, and every event it returns has a type.
func FuzzMCPEventReader(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "mcp", "sse", "*.txt"))
	for _, file := range files {
		b, _ := os.ReadFile(file)
		stream, _, _ := strings.Cut(string(b), "\n---\n")
		f.Add([]byte(stream))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		const max = 128
		r := newMCPEventReader(bytes.NewReader(stream), max)
		for i := 0; ; i++ {
			if i > len(stream) {
				t.Fatalf("more events than bytes")
			}
			ev, err := r.next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, errMCPEventTooLong) {
					t.Fatalf("error %v", err)
				}
				return
			}
			if ev.Type == "" || len(ev.Data) > max {
				t.Fatalf("event %+v", ev)
			}
		}
	})
}

// FuzzMCPMessageLines: what the decoder accepts is lines of JSON objects,
// one per message, each within the bound, none holding a raw newline.
func FuzzMCPMessageLines(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `[{"a":1},{"b":2}]`, `[]`, " {\n\"a\" : \"\\n\"}\t", `{"a":1}{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := mcpMessageLines(b)
		if err != nil {
			return
		}
		if len(out) == 0 || out[len(out)-1] != '\n' {
			t.Fatalf("output %q does not end a line", out)
		}
		for _, line := range bytes.Split(out[:len(out)-1], []byte("\n")) {
			var obj map[string]json.RawMessage
			if len(line) > mcpMaxMessage || line[0] != '{' || json.Unmarshal(line, &obj) != nil {
				t.Fatalf("line %q is not one JSON object", line)
			}
		}
	})
}
