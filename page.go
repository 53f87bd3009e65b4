package etagstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/pagetoken"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Page is one page of a listing: documents in key order and the token
// that fetches the page after it.
type Page[T any] struct {
	// Docs holds the page's documents in key order: exactly the limit
	// asked for, unless the listing ended first (or documents were deleted
	// while the page was read). Expired documents (Expiry) are skipped,
	// and the page is filled from the documents after them.
	Docs []Doc[T]
	// Next is the token of the next page, or "" when this page is the last
	// one. A non-empty Next can still lead to an empty page, when the
	// documents after this page were deleted in between.
	Next string
}

// Page returns one page of the documents whose key starts with prefix, in
// key order (the order of List; see CompareKeys). token is "" for the
// first page and the previous page's Next after that; limit is how many
// documents a page holds, from 1 to 5000 (the largest page any of Azure's
// listings returns; a backend whose service pages are smaller fetches as
// many as it takes).
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
	ctx, sp := s.obs.Begin(ctx, telemetry.OpPage, prefix)
	p, err := s.page(ctx, "list\x00"+prefix, limit, token, func(ctx context.Context, after string, limit int) ([]driver.Item, bool, error) {
		if s.reserved(prefix) {
			return nil, false, nil // no document's key
		}
		if after != "" && !strings.HasPrefix(after, prefix) {
			return nil, false, errorf(ErrInvalidInput, "page token is not for prefix %q", prefix)
		}
		return s.b.ListPage(ctx, prefix, after, limit)
	})
	sp.End(err)
	return p, err
}

// CompareKeys compares keys in the order List and Page yield them, the
// order the backend declares (driver.Abilities.CompareKeys): by UTF-16
// code units on memstore, blobstore and a tablestore with
// Options.Partition; by PartitionKey, then RowKey on a tablestore without
// it, where a table is listed in one streaming query. The result is -1, 0
// or +1. A prefix selects the same documents in either order.
func (s *Store[T]) CompareKeys(a, b string) int { return s.abilities.KeyOrder()(a, b) }

// page checks limit and token (made for scope), calls list with the key
// to resume after ("" for the first page) and limit, which must answer as
// driver.Backend.ListPage does, decodes the items and makes the next token.
func (s *Store[T]) page(ctx context.Context, scope string, limit int, token string, list func(ctx context.Context, after string, limit int) (items []driver.Item, more bool, err error)) (Page[T], error) {
	if limit < 1 || limit > driver.MaxPageLimit {
		return Page[T]{}, errorf(ErrInvalidInput, "page limit %d is not between 1 and %d", limit, driver.MaxPageLimit)
	}
	if s.abilities.CompareKeys != nil {
		// Tokens of a backend with an order of its own (a tablestore
		// without Options.Partition) are bound to it: one made in the
		// UTF-16 order of earlier versions is refused, never resumed in
		// the wrong place.
		scope += "\x00backend key order"
	}
	after, err := pagetoken.Decode(scope, token, max(s.abilities.MaxKeyLen, pagetoken.DefaultMaxKey))
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
	var p Page[T]
	for {
		// Expired documents (Expiry) are skipped: the page is filled from
		// the listing's next items.
		want := limit - len(p.Docs)
		items, more, err := list(ctx, after, want)
		if err != nil {
			return Page[T]{}, err
		}
		if len(items) > want {
			return Page[T]{}, fmt.Errorf("etagstore: backend %T returned %d items for a page of %d", s.b, len(items), want)
		}
		skipped, err := s.decodeInto(&p, items)
		switch {
		case err != nil:
			return Page[T]{}, err
		case !more:
			return p, nil
		case len(items) == 0:
			return Page[T]{}, fmt.Errorf("etagstore: backend %T reported more items after an empty page", s.b)
		}
		after = items[len(items)-1].Key
		if !skipped || len(p.Docs) == limit || ctx.Err() != nil {
			p.Next = pagetoken.Encode(scope, after)
			return p, nil
		}
	}
}

// decodeInto adds items, decoded, to p's documents, and reports whether
// it skipped one that has expired (Expiry).
func (s *Store[T]) decodeInto(p *Page[T], items []driver.Item) (skipped bool, err error) {
	if p.Docs == nil {
		p.Docs = make([]Doc[T], 0, len(items))
	}
	for _, it := range items {
		d, err := s.decode(it)
		switch {
		case isExpired(err):
			skipped = true
		case err != nil:
			return skipped, err
		default:
			p.Docs = append(p.Docs, d)
		}
	}
	return skipped, nil
}
