package etagstore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxPageLimit is the largest limit Store.Page accepts: the largest page
// any of Azure's listings returns (5000 blobs). A backend whose service
// pages are smaller (1000 entities per table query) fetches as many as it
// takes to fill the page.
const MaxPageLimit = 5000

// Page is one page of a listing: documents in key order and the token
// that fetches the page after it.
type Page[T any] struct {
	// Docs holds the page's documents in key order: exactly the limit
	// asked for, unless the listing ended first (or documents were deleted
	// while the page was read).
	Docs []Doc[T]
	// Next is the token of the next page, or "" when this page is the last
	// one. A non-empty Next can still lead to an empty page, when the
	// documents after this page were deleted in between.
	Next string
}

// Page returns one page of the documents whose key starts with prefix, in
// key order (the order of List). token is "" for the first page and the
// previous page's Next after that; limit is how many documents a page
// holds, from 1 to MaxPageLimit.
//
// A page resumes after the last key of the page before it, not from a
// position of the service: documents added or deleted between calls never
// make a document appear twice, and a document that exists from the first
// page to the last is on exactly one page. A document added ahead of the
// last page read appears; one added behind it does not.
//
// Tokens are opaque, URL-safe and stateless (they never expire and work
// in any process): they carry the last key of the page, which the page
// showed anyway, and a checksum that binds them to prefix. A limit out of
// range, and a token that was altered or belongs to another prefix, match
// ErrInvalidInput; nothing is sent. A token is not a capability: anyone
// who can call Page with prefix can list its documents anyway.
//
// A document the Codec cannot decode fails the whole page.
func (s *Store[T]) Page(ctx context.Context, prefix string, limit int, token string) (Page[T], error) {
	ctx, sp := s.obs.begin(ctx, opPage, prefix)
	p, err := PageOf(ctx, s, "list\x00"+prefix, limit, token, func(ctx context.Context, after string, limit int) ([]Item, bool, error) {
		if after != "" && !strings.HasPrefix(after, prefix) {
			return nil, false, errorf(ErrInvalidInput, "page token is not for prefix %q", prefix)
		}
		return s.b.ListPage(ctx, prefix, after, limit)
	})
	sp.end(err)
	return p, err
}

// PageOf is Store.Page for a listing of the backend's own, such as
// tablestore.QueryPage; application code calls those. scope names the
// listing (the query, with a name space of its own): a token is accepted
// only by the scope that made it. PageOf checks limit and token, calls list
// with the key to resume after ("" for the first page) and limit, which
// must answer as Backend.ListPage does, decodes the items and makes the
// next token.
func PageOf[T any](ctx context.Context, s *Store[T], scope string, limit int, token string, list func(ctx context.Context, after string, limit int) (items []Item, more bool, err error)) (Page[T], error) {
	if limit < 1 || limit > MaxPageLimit {
		return Page[T]{}, errorf(ErrInvalidInput, "page limit %d is not between 1 and %d", limit, MaxPageLimit)
	}
	after, err := parsePageToken(scope, token)
	if err != nil {
		return Page[T]{}, err
	}
	if after != "" {
		if err := s.b.ValidateKey(after); err != nil {
			return Page[T]{}, errorf(ErrInvalidInput, "page token holds no key of this store: %v", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return Page[T]{}, err
	}
	items, more, err := list(ctx, after, limit)
	if err != nil {
		return Page[T]{}, err
	}
	if len(items) > limit {
		return Page[T]{}, fmt.Errorf("etagstore: backend %T returned %d items for a page of %d", s.b, len(items), limit)
	}
	p := Page[T]{Docs: make([]Doc[T], 0, len(items))}
	for _, it := range items {
		d, err := s.decode(it)
		if err != nil {
			return Page[T]{}, err
		}
		p.Docs = append(p.Docs, d)
	}
	if more {
		if len(items) == 0 {
			return Page[T]{}, fmt.Errorf("etagstore: backend %T reported more items after an empty page", s.b)
		}
		p.Next = pageToken(scope, items[len(items)-1].Key)
	}
	return p, nil
}

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
	maxPageTokenKey  = 8 << 10 // longer than any backend's longest key
)

var errBadToken = errors.New("page token is invalid, altered, or from another listing")

func pageToken(scope, after string) string {
	b := make([]byte, 0, 1+len(after)+pageTokenSum)
	b = append(b, pageTokenVersion)
	b = append(b, after...)
	b = append(b, pageTokenChecksum(scope, after)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsePageToken returns the key token resumes after, "" for the empty
// token. Anything but a token pageToken made for scope matches
// ErrInvalidInput.
func parsePageToken(scope, token string) (string, error) {
	if token == "" {
		return "", nil
	}
	if len(token) > base64.RawURLEncoding.EncodedLen(1+maxPageTokenKey+pageTokenSum) {
		return "", fmt.Errorf("%w: %w", ErrInvalidInput, errBadToken)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(b) < 1+1+pageTokenSum || b[0] != pageTokenVersion {
		return "", fmt.Errorf("%w: %w", ErrInvalidInput, errBadToken)
	}
	after, sum := string(b[1:len(b)-pageTokenSum]), b[len(b)-pageTokenSum:]
	if !bytes.Equal(sum, pageTokenChecksum(scope, after)) || !utf8.ValidString(after) {
		return "", fmt.Errorf("%w: %w", ErrInvalidInput, errBadToken)
	}
	return after, nil
}

func pageTokenChecksum(scope, after string) []byte {
	h := sha256.New()
	var n [1 + binary.MaxVarintLen64]byte
	n[0] = pageTokenVersion
	h.Write(binary.AppendUvarint(n[:1], uint64(len(scope))))
	h.Write([]byte(scope))
	h.Write([]byte(after))
	return h.Sum(nil)[:pageTokenSum]
}

// CompareKeys compares keys in the order List and Page yield them, the
// order of Azure's tables and blob listings: by UTF-16 code units. It
// differs from Go's string (code point) order in that characters above
// U+FFFF, encoded as surrogate pairs (U+D800–U+DFFF), sort before
// U+E000–U+FFFF. The result is -1, 0 or +1.
func CompareKeys(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmp.Compare(utf16Rank(ra), utf16Rank(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Rank maps r to a number that orders runes as their UTF-16 encodings
// order.
func utf16Rank(r rune) int {
	switch {
	case r >= 0x10000: // a surrogate pair, between U+D7FF and U+E000
		return 0xD800 + int(r-0x10000)
	case r >= 0xE000:
		return 0x110000 + int(r)
	}
	return int(r)
}
