// Package etaghttp carries etagstore's optimistic concurrency over HTTP:
// a document's ETag becomes the HTTP ETag header and comes back exactly in
// If-Match / If-None-Match; a write without If-Match is answered 428
// Precondition Required, a stale one 412 Precondition Failed with an RFC 9457
// problem-details body holding the current ETag and a diff, and a
// conditional GET of the current version 304 Not Modified.
//
// Handler serves a Store[T] as a JSON REST resource (GET, PUT, PATCH,
// DELETE) that mounts in any http.ServeMux.
package etaghttp

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/etagstore/etagstore"
)

// FormatETag encodes a storage ETag as an HTTP entity tag. Storage ETags
// are opaque and some (Azure Table's W/"datetime'…'") hold characters that
// clients mangle, so the whole string is carried base64url-encoded inside a
// strong entity tag; ParseETag returns it byte for byte.
func FormatETag(e etagstore.ETag) string {
	if e == etagstore.ETagAny {
		return "*"
	}
	return `"` + base64.RawURLEncoding.EncodeToString([]byte(e)) + `"`
}

// ErrBadETag matches an entity tag that FormatETag did not make.
var ErrBadETag = errors.New("etaghttp: malformed entity tag")

// ParseETag decodes one entity tag made by FormatETag; a weak tag (W/"…")
// is accepted the same. "*" is etagstore.ETagAny. A tag FormatETag cannot
// have made (another encoding of the same bytes, or the encoding of "*")
// matches ErrBadETag.
func ParseETag(tag string) (etagstore.ETag, error) {
	tag = strings.TrimSpace(tag)
	if tag == "*" {
		return etagstore.ETagAny, nil
	}
	tag = strings.TrimPrefix(tag, "W/")
	if len(tag) < 2 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return "", fmt.Errorf("%w: %q", ErrBadETag, tag)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(tag[1 : len(tag)-1])
	if err != nil || len(raw) == 0 || etagstore.ETag(raw) == etagstore.ETagAny {
		return "", fmt.Errorf("%w: %q", ErrBadETag, tag)
	}
	return etagstore.ETag(raw), nil
}
