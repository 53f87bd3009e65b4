package etagstore

import (
	"context"
	"strings"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/core"
	"github.com/etagstore/etagstore/internal/paging"
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
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpPage, prefix)
	p, err := s.page(ctx, "list\x00"+prefix, limit, token, func(ctx context.Context, after string, limit int) ([]driver.Item, bool, error) {
		if s.core.Reserved(prefix) {
			return nil, false, nil // no document's key
		}
		if after != "" && !strings.HasPrefix(after, prefix) {
			return nil, false, errorf(ErrInvalidInput, "page token is not for prefix %q", prefix)
		}
		return s.core.Backend.ListPage(ctx, prefix, after, limit)
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
func (s *Store[T]) CompareKeys(a, b string) int { return s.core.Abilities.KeyOrder()(a, b) }

// page is one page of the documents list yields after the key token
// names, made for scope (see paging.Fill).
func (s *Store[T]) page(ctx context.Context, scope string, limit int, token string, list paging.List) (Page[T], error) {
	docs, next, err := paging.Fill(ctx, paging.Lister{Backend: s.core.Backend, Abilities: &s.core.Abilities}, scope, limit, token, list, s.decode, core.IsExpired)
	if err != nil {
		return Page[T]{}, err
	}
	return Page[T]{Docs: docs, Next: next}, nil
}
