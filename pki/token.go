package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// TokenBytes is the number of random bytes in a token (NewToken).
const TokenBytes = 32

// NewToken returns a new bearer token for the operator API: TokenBytes
// bytes from the operating system's secure random source, in lowercase hex
// (64 characters).
func NewToken() string {
	b := make([]byte, TokenBytes)
	rand.Read(b) // never returns an error: the program crashes instead
	return hex.EncodeToString(b)
}

// TokenEqual reports whether the token a client presented equals the one
// configured, in time independent of their contents and lengths (both are
// hashed first). An empty configured token matches nothing.
func TokenEqual(presented, configured string) bool {
	if configured == "" {
		return false
	}
	p, c := sha256.Sum256([]byte(presented)), sha256.Sum256([]byte(configured))
	return subtle.ConstantTimeCompare(p[:], c[:]) == 1
}
