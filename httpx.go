// httpx.go owns what serve's host API (DESIGN.md §7) and the reference
// provider (§8) do alike as HTTP servers: the bearer check, whole replies and
// JSON errors, the bounded body read, the 401 and the server's timeouts.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Timeouts of both servers: a request's headers must arrive within the
// first; an idle keep-alive connection holds a descriptor, so it is closed
// after the second (an event stream is a response in progress, never idle).
const (
	serverReadHeaderTimeout = 10 * time.Second
	serverIdleConnTimeout   = 2 * time.Minute
)

// newHTTPServer returns a server of h whose requests run under ctx and whose
// own errors are logged at warn level, with both servers' timeouts.
func newHTTPServer(ctx context.Context, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: serverReadHeaderTimeout,
		IdleTimeout:       serverIdleConnTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// Why a bearer check failed: the host API's 401 hint and the label of
// serve's auth_failures_total name it. No reason quotes the header: a token
// sent without its scheme would be echoed.
const (
	authNoHeader = "no_header" // no Authorization header
	authScheme   = "scheme"    // a header that is not "Bearer <token>"
	authToken    = "token"     // a bearer token that is not the one
)

// bearerFailure returns "" when an Authorization header is "Bearer <token>",
// the scheme in any case (RFC 7235), else why it is not. The token is
// compared in constant time, also in the length.
func bearerFailure(header, token string) string {
	if header == "" {
		return authNoHeader
	}
	scheme, got, _ := strings.Cut(header, " ")
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	same := subtle.ConstantTimeCompare(a[:], b[:]) == 1
	switch {
	case !asciiEqualFold(scheme, "Bearer"):
		return authScheme
	case !same:
		return authToken
	}
	return ""
}

// bearerMatches reports whether an Authorization header is "Bearer <token>".
func bearerMatches(header, token string) bool { return bearerFailure(header, token) == "" }

// writeUnauthorized answers 401 with v whatever was wrong, then closes the
// connection: without the token no client holds one to use up descriptors.
func writeUnauthorized(w http.ResponseWriter, v errorBody, newline bool) {
	w.Header().Set("Connection", "close")
	w.Header().Set("WWW-Authenticate", "Bearer")
	writeJSON(w, http.StatusUnauthorized, v, newline)
}

// jsonContentType is the media type of a JSON body, the one both servers'
// replies carry and the provider wire requires (wireContentType).
const jsonContentType = "application/json"

// errorBody is a JSON error: {"error":...,"code":...} on the host API,
// {"error":...} (no code) on the provider's wire.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
	Hint  string `json:"hint,omitempty"` // the fix, where one is known
}

// writeJSON sends v as one whole JSON reply. The host API's replies end with
// a newline; the provider's wire replies are the bare value.
func writeJSON(w http.ResponseWriter, status int, v any, newline bool) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error","code":"internal_error"}`)
	}
	if newline {
		b = append(b, '\n')
	}
	writeReply(w, status, jsonContentType, b)
}

// writeReply sends one whole reply, never cached.
func writeReply(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

// readBody reads a request body of at most limit bytes whole. On failure it
// returns the status to answer: 413 past the bound, 400 when the read fails.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, error) {
	var data []byte
	err := error(&http.MaxBytesError{Limit: limit})
	if r.ContentLength <= limit {
		data, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", limit)
	} else if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	return data, http.StatusOK, nil
}
