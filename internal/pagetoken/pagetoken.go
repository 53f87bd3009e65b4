// Package pagetoken makes and checks the opaque tokens of paged listings
// (Store.Page, tablestore.QueryPage).
package pagetoken

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/etagstore/etagstore/driver"
)

// A page token is base64url (no padding) of
//
//	version (1 byte) | the key to resume after | checksum (8 bytes)
//
// where the checksum is the first 8 bytes of SHA-256 over the version, the
// scope (length-prefixed) and the key. It has no secret: it catches a
// token that was altered or truncated, and one used with another scope.
const (
	pageTokenVersion = 1
	pageTokenSum     = 8
	// DefaultMaxKey bounds the key of a token when the backend declares no
	// longer keys (driver.Abilities.MaxKeyLen): longer than the Azure
	// services' longest key.
	DefaultMaxKey = 8 << 10
)

var errBadToken = errors.New("page token is invalid, altered, or from another listing")

// Encode returns the token of the page after the key after, in scope.
func Encode(scope, after string) string {
	b := make([]byte, 0, 1+len(after)+pageTokenSum)
	b = append(b, pageTokenVersion)
	b = append(b, after...)
	b = append(b, checksum(scope, after)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the key token resumes after, "" for the empty token. A
// token holding a key longer than maxKey bytes, and anything but a token
// Encode made for scope, matches driver.ErrInvalidInput.
func Decode(scope, token string, maxKey int) (string, error) {
	if token == "" {
		return "", nil
	}
	if len(token) > base64.RawURLEncoding.EncodedLen(1+maxKey+pageTokenSum) {
		return "", fmt.Errorf("%w: %w", driver.ErrInvalidInput, errBadToken)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(b) < 1+1+pageTokenSum || b[0] != pageTokenVersion {
		return "", fmt.Errorf("%w: %w", driver.ErrInvalidInput, errBadToken)
	}
	after, sum := string(b[1:len(b)-pageTokenSum]), b[len(b)-pageTokenSum:]
	if !bytes.Equal(sum, checksum(scope, after)) || !utf8.ValidString(after) {
		return "", fmt.Errorf("%w: %w", driver.ErrInvalidInput, errBadToken)
	}
	return after, nil
}

func checksum(scope, after string) []byte {
	h := sha256.New()
	var n [1 + binary.MaxVarintLen64]byte
	n[0] = pageTokenVersion
	h.Write(binary.AppendUvarint(n[:1], uint64(len(scope))))
	h.Write([]byte(scope))
	h.Write([]byte(after))
	return h.Sum(nil)[:pageTokenSum]
}
