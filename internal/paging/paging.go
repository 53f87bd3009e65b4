// Package paging makes one page of a listing, generic in its documents'
// type: the limit and the token checked, the items decoded, expired ones
// skipped and the page filled from the items after them, and the next
// page's token (internal/pagetoken) made. Store.Page and the backends'
// paged queries (through internal/access) share it; Store.List decodes a
// whole listing as it streams (Each). Its refusals match
// the driver's sentinels, as the root's do.
package paging

import (
	"context"
	"fmt"
	"iter"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/pagetoken"
)

// List answers as driver.Backend.ListPage does: up to limit items after
// the key after, and whether more follow.
type List = func(ctx context.Context, after string, limit int) (items []driver.Item, more bool, err error)

// Lister is what Fill needs of the listing's backend: its abilities (its
// key order, its longest key) and its keys.
type Lister struct {
	Backend   driver.Backend
	Abilities *driver.Abilities
}

// Fill checks limit and token (made for scope), calls list with the key
// to resume after ("" for the first page) and limit, decodes the items
// with decode — an item whose error skipped reports (an expired
// document) is left out, and the page filled from the listing's next
// items — and makes the next page's token ("" after the last page). A
// limit out of range, and a token altered, made for another scope or
// holding no key of the backend, match ErrInvalidInput; nothing is sent.
func Fill[D any](ctx context.Context, l Lister, scope string, limit int, token string, list List, decode func(driver.Item) (D, error), skipped func(error) bool) (docs []D, next string, err error) {
	if limit < 1 || limit > driver.MaxPageLimit {
		return nil, "", driver.Errorf(driver.ErrInvalidInput, "page limit %d is not between 1 and %d", limit, driver.MaxPageLimit)
	}
	if l.Abilities.CompareKeys != nil {
		// Tokens of a backend with an order of its own (a tablestore
		// without Options.Partition) are bound to it: one made in the
		// UTF-16 order of earlier versions is refused, never resumed in
		// the wrong place.
		scope += "\x00backend key order"
	}
	after, err := pagetoken.Decode(scope, token, max(l.Abilities.MaxKeyLen, pagetoken.DefaultMaxKey))
	if err != nil {
		return nil, "", err
	}
	if after != "" {
		if err := l.Backend.ValidateKey(after); err != nil {
			return nil, "", driver.Errorf(driver.ErrInvalidInput, "page token holds no key of this store: %v", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	for {
		// Expired documents (Expiry) are skipped: the page is filled from
		// the listing's next items.
		want := limit - len(docs)
		items, more, err := list(ctx, after, want)
		if err != nil {
			return nil, "", err
		}
		if len(items) > want {
			return nil, "", fmt.Errorf("etagstore: backend %T returned %d items for a page of %d", l.Backend, len(items), want)
		}
		skip, err := decodeInto(&docs, items, decode, skipped)
		switch {
		case err != nil:
			return nil, "", err
		case !more:
			return docs, "", nil
		case len(items) == 0:
			return nil, "", fmt.Errorf("etagstore: backend %T reported more items after an empty page", l.Backend)
		}
		after = items[len(items)-1].Key
		if !skip || len(docs) == limit || ctx.Err() != nil {
			return docs, pagetoken.Encode(scope, after), nil
		}
	}
}

// Each yields the items of a listing decoded with decode, leaving out
// an item whose error skipped reports (an expired document). An error,
// the listing's (with a zero D) or a decoding's, is yielded once, ends
// the sequence and is returned; nil when the listing ended or yield
// stopped it.
func Each[D any](items iter.Seq2[driver.Item, error], decode func(driver.Item) (D, error), skipped func(error) bool, yield func(D, error) bool) error {
	for it, err := range items {
		if err != nil {
			var zero D
			yield(zero, err)
			return err
		}
		d, err := decode(it)
		if skipped(err) {
			continue
		}
		if !yield(d, err) || err != nil {
			return err
		}
	}
	return nil
}

// decodeInto adds items, decoded, to docs, and reports whether it
// skipped one (an expired document). An empty page's slice is sized by
// what the listing returned, not by the limit.
func decodeInto[D any](docs *[]D, items []driver.Item, decode func(driver.Item) (D, error), skipped func(error) bool) (skip bool, err error) {
	if *docs == nil {
		*docs = make([]D, 0, len(items))
	}
	for _, it := range items {
		d, err := decode(it)
		switch {
		case skipped(err):
			skip = true
		case err != nil:
			return skip, err
		default:
			*docs = append(*docs, d)
		}
	}
	return skip, nil
}
