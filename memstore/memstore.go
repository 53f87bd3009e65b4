// Package memstore is an in-memory etagstore.Backend with the concurrency
// semantics of Azure Storage: a new ETag on every write, 412 on a stale
// If-Match, 409 on creating an existing key, 404 on a missing key, the "*"
// wildcard, and the unconditional upsert bypass.
//
// It is a backend in its own right, for demos, tests of code built on
// etagstore, and single-process use; it passes the same conformance suite
// (storetest) as the Azure backends.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/etagstore/etagstore"
)

// Options configure a Backend. Nil means the defaults.
type Options struct {
	// MaxDocSize is the largest document accepted, in bytes; a larger one
	// matches etagstore.ErrTooLarge. Default: 1 MiB, Azure's entity limit.
	MaxDocSize int
	// MaxKeyLen is the longest key accepted, in bytes. Default: 1024.
	MaxKeyLen int
}

// Backend is an in-memory etagstore.Backend. It is safe for concurrent use.
type Backend struct {
	opts Options

	mu      sync.RWMutex
	docs    map[string]etagstore.Item
	version uint64 // bumped on every write; never reused, so ETags are unique
}

var _ etagstore.Backend = (*Backend)(nil)

// New returns an empty Backend. Nil opts means the defaults.
func New(opts *Options) *Backend {
	b := &Backend{docs: make(map[string]etagstore.Item)}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.MaxDocSize <= 0 {
		b.opts.MaxDocSize = 1 << 20
	}
	if b.opts.MaxKeyLen <= 0 {
		b.opts.MaxKeyLen = 1024
	}
	return b
}

// VerbatimData reports that Read returns documents byte for byte as
// written (see etagstore.Verbatim).
func (b *Backend) VerbatimData() bool { return true }

// ValidateKey accepts keys of at most MaxKeyLen bytes that pass
// etagstore.CheckKey; otherwise the error matches etagstore.ErrInvalidKey.
func (b *Backend) ValidateKey(key string) error {
	if err := etagstore.CheckKey(key); err != nil {
		return err
	}
	if len(key) > b.opts.MaxKeyLen {
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", etagstore.ErrInvalidKey, len(key), b.opts.MaxKeyLen)
	}
	return nil
}

// Read returns the item under key, or an error matching etagstore.ErrNotFound.
func (b *Backend) Read(ctx context.Context, key string) (etagstore.Item, error) {
	if err := ctx.Err(); err != nil {
		return etagstore.Item{}, err
	}
	b.mu.RLock()
	it, ok := b.docs[key]
	b.mu.RUnlock()
	if !ok {
		return etagstore.Item{}, fmt.Errorf("%w: %q", etagstore.ErrNotFound, key)
	}
	it.Data = bytes.Clone(it.Data)
	return it, nil
}

// Write stores w under key if w.Cond holds; see etagstore.Backend.
func (b *Backend) Write(ctx context.Context, key string, w etagstore.Write) (etagstore.ETag, error) {
	if err := b.check(ctx, key, w.Cond); err != nil {
		return "", err
	}
	if len(w.Data) > b.opts.MaxDocSize {
		return "", fmt.Errorf("%w: document %q is %d bytes, the limit is %d", etagstore.ErrTooLarge, key, len(w.Data), b.opts.MaxDocSize)
	}
	if len(w.Meta) > etagstore.MaxMetaLen {
		return "", fmt.Errorf("%w: meta of %q is %d bytes", etagstore.ErrTooLarge, key, len(w.Meta))
	}
	data := bytes.Clone(w.Data)
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, exists := b.docs[key]
	if err := precondition(key, w.Cond, cur, exists); err != nil {
		return "", err
	}
	b.version++
	etag := etagstore.ETag(strconv.AppendUint(append(make([]byte, 0, 20), `"0x`...), b.version, 16)) + `"`
	b.docs[key] = etagstore.Item{Key: key, Data: data, Meta: w.Meta, ETag: etag}
	return etag, nil
}

// Delete removes key if cond holds; see etagstore.Backend.
func (b *Backend) Delete(ctx context.Context, key string, cond etagstore.Cond) error {
	if err := b.check(ctx, key, cond); err != nil {
		return err
	}
	if cond.Kind != etagstore.CondIfMatch {
		return fmt.Errorf("%w: delete needs an If-Match condition, got %s", etagstore.ErrETagRequired, cond.Kind)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, exists := b.docs[key]
	if err := precondition(key, cond, cur, exists); err != nil {
		return err
	}
	delete(b.docs, key)
	return nil
}

func (b *Backend) check(ctx context.Context, key string, cond etagstore.Cond) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.ValidateKey(key); err != nil {
		return err
	}
	return cond.Check()
}

// precondition applies Azure's rules for cond to the current state.
func precondition(key string, cond etagstore.Cond, cur etagstore.Item, exists bool) error {
	switch cond.Kind {
	case etagstore.CondCreate:
		if exists {
			return fmt.Errorf("%w: %q", etagstore.ErrExists, key)
		}
	case etagstore.CondIfMatch:
		if !exists {
			return fmt.Errorf("%w: %q", etagstore.ErrNotFound, key)
		}
		if cond.ETag != etagstore.ETagAny && cond.ETag != cur.ETag {
			return fmt.Errorf("%w: %q is at %s, not %s", etagstore.ErrConflict, key, cur.ETag, cond.ETag)
		}
	}
	return nil
}

// List yields the items whose key starts with prefix, in key order (by
// UTF-16 code units, as Azure's services order keys), from a snapshot taken
// when iteration starts.
func (b *Backend) List(ctx context.Context, prefix string) iter.Seq2[etagstore.Item, error] {
	return func(yield func(etagstore.Item, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(etagstore.Item{}, err)
			return
		}
		b.mu.RLock()
		var items []etagstore.Item
		for k, it := range b.docs {
			if strings.HasPrefix(k, prefix) {
				items = append(items, it)
			}
		}
		b.mu.RUnlock()
		slices.SortFunc(items, func(a, b etagstore.Item) int { return etagstore.CompareKeys(a.Key, b.Key) })
		for _, it := range items {
			it.Data = bytes.Clone(it.Data)
			if !yield(it, nil) {
				return
			}
		}
	}
}

// ListPage returns up to limit items whose key starts with prefix and
// sorts after the key after, in key order (etagstore.CompareKeys), and
// whether more follow; see etagstore.Backend.
func (b *Backend) ListPage(ctx context.Context, prefix, after string, limit int) ([]etagstore.Item, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	b.mu.RLock()
	var items []etagstore.Item
	for k, it := range b.docs {
		if strings.HasPrefix(k, prefix) && etagstore.CompareKeys(k, after) > 0 {
			items = append(items, it)
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(items, func(a, b etagstore.Item) int { return etagstore.CompareKeys(a.Key, b.Key) })
	more := len(items) > limit
	items = items[:min(len(items), limit)]
	for i := range items {
		items[i].Data = bytes.Clone(items[i].Data)
	}
	return items, more, nil
}
