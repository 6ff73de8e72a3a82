// httpx_test.go checks the pieces both servers share: the bearer check and
// the bounded body read.
package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBearerMatches(t *testing.T) {
	const token = "s3cret"
	for _, tt := range []struct {
		header string
		ok     bool
	}{
		{"Bearer s3cret", true},
		{"bearer s3cret", true},
		{"BEARER s3cret", true},
		{"bEaReR s3cret", true},
		{"Basic s3cret", false},
		{"Bearers3cret", false},
		{"Bearer  s3cret", false},
		{"Bearer s3cret ", false},
		{"Bearer\ts3cret", false},
		{"Bearer s3cre", false},
		{"Bearer s3cret2", false},
		{"Bearer S3CRET", false},
		{"s3cret", false},
		{"Bearer ", false},
		{"Bearer", false},
		{"", false},
	} {
		if got := bearerMatches(tt.header, token); got != tt.ok {
			t.Errorf("bearerMatches(%q) = %v, want %v", tt.header, got, tt.ok)
		}
	}
}

// failingReader fails after its data.
type failingReader struct{ io.Reader }

func (r failingReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if err == io.EOF {
		err = errors.New("connection reset")
	}
	return n, err
}

func TestReadBody(t *testing.T) {
	const limit = 16
	for _, tt := range []struct {
		name          string
		body          io.Reader
		contentLength int64 // -1: unknown
		status        int
		err           string
	}{
		{"empty", strings.NewReader(""), 0, http.StatusOK, ""},
		{"at the bound", strings.NewReader(strings.Repeat("a", limit)), limit, http.StatusOK, ""},
		{"at the bound, length unknown", strings.NewReader(strings.Repeat("a", limit)), -1, http.StatusOK, ""},
		{"one byte over", strings.NewReader(strings.Repeat("a", limit+1)), limit + 1, http.StatusRequestEntityTooLarge, "body over 16 bytes"},
		{"over, length unknown", strings.NewReader(strings.Repeat("a", 4*limit)), -1, http.StatusRequestEntityTooLarge, "body over 16 bytes"},
		{"declared over, nothing sent", strings.NewReader(""), 1 << 30, http.StatusRequestEntityTooLarge, "body over 16 bytes"},
		{"read fails", failingReader{strings.NewReader("ab")}, -1, http.StatusBadRequest, "read body: connection reset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", tt.body)
			r.ContentLength = tt.contentLength
			data, status, err := readBody(httptest.NewRecorder(), r, limit)
			if status != tt.status {
				t.Errorf("status %d, want %d", status, tt.status)
			}
			switch {
			case tt.err == "" && (err != nil || len(data) > limit):
				t.Errorf("read %d bytes, error %v", len(data), err)
			case tt.err != "" && (err == nil || err.Error() != tt.err || data != nil):
				t.Errorf("error %v with %d bytes, want %q", err, len(data), tt.err)
			}
		})
	}
}
