// ids.go owns the random identifiers: every id, nonce and token acpguard
// makes (session, prompt, request and stream ids, host tokens, UUIDs)
// comes from crypto/rand through these.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// randomIDBytes makes an id 128 bits: never guessed, never repeated.
const randomIDBytes = 16

// randomHex returns n random bytes from crypto/rand, hex-encoded: every
// random id, nonce and token comes from it. crypto/rand.Read never returns
// an error: it ends the process instead.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newUUID is a random (version 4) UUID: serve's session ids, run's
// message ids.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
