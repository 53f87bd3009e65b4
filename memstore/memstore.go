// Package memstore is an in-memory driver.Backend with the concurrency
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

	"github.com/etagstore/etagstore/driver"
)

// Options configure a Backend. Nil means the defaults.
type Options struct {
	// MaxDocSize is the largest document accepted, in bytes; a larger one
	// matches driver.ErrTooLarge. Default: 1 MiB, Azure's entity limit.
	MaxDocSize int
	// MaxKeyLen is the longest key accepted, in bytes. Default: 1024.
	MaxKeyLen int
}

// Backend is an in-memory driver.Backend. It is safe for concurrent use.
type Backend struct {
	opts Options

	mu      sync.RWMutex
	docs    map[string]driver.Item
	version uint64 // bumped on every write; never reused, so ETags are unique
}

var _ driver.Backend = (*Backend)(nil)

// New returns an empty Backend. Nil opts means the defaults.
func New(opts *Options) *Backend {
	b := &Backend{docs: make(map[string]driver.Item)}
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

// Abilities reports that Read returns documents byte for byte as written,
// and that several writes over any keys can be committed atomically.
// memstore cannot merge (driver.ModeMerge).
func (b *Backend) Abilities() driver.Abilities {
	return driver.Abilities{Verbatim: true, Commit: b.commit, MaxKeyLen: b.opts.MaxKeyLen}
}

// As sets a **memstore.Backend target to b.
func (b *Backend) As(target any) bool {
	if p, ok := target.(**Backend); ok {
		*p = b
		return true
	}
	return false
}

// ValidateKey accepts keys of at most MaxKeyLen bytes; otherwise the error
// matches driver.ErrInvalidKey. (The Store has applied driver.CheckKey.)
func (b *Backend) ValidateKey(key string) error {
	if len(key) > b.opts.MaxKeyLen {
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", driver.ErrInvalidKey, len(key), b.opts.MaxKeyLen)
	}
	return nil
}

// Read returns the item under key, or an error matching driver.ErrNotFound.
func (b *Backend) Read(ctx context.Context, key string) (driver.Item, error) {
	if err := ctx.Err(); err != nil {
		return driver.Item{}, err
	}
	b.mu.RLock()
	it, ok := b.docs[key]
	b.mu.RUnlock()
	if !ok {
		return driver.Item{}, fmt.Errorf("%w: %q", driver.ErrNotFound, key)
	}
	it.Data = bytes.Clone(it.Data)
	return it, nil
}

// Write stores w under key if w.Cond holds; see driver.Backend.
func (b *Backend) Write(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := b.check(key, w); err != nil {
		return "", err
	}
	data := bytes.Clone(w.Data)
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, exists := b.docs[key]
	if err := precondition(key, w.Cond, cur, exists); err != nil {
		return "", err
	}
	return b.put(key, data, w.Meta), nil
}

// check refuses, before anything changes, a write memstore cannot make.
func (b *Backend) check(key string, w driver.Write) error {
	if err := w.Cond.Check(); err != nil {
		return err
	}
	if w.Mode != driver.ModeReplace {
		return fmt.Errorf("%w: memstore cannot merge %q", driver.ErrInvalidInput, key)
	}
	if len(w.Data) > b.opts.MaxDocSize {
		return fmt.Errorf("%w: document %q is %d bytes, the limit is %d", driver.ErrTooLarge, key, len(w.Data), b.opts.MaxDocSize)
	}
	return nil
}

// put stores data under key as a new version and returns its ETag. b.mu
// is held.
func (b *Backend) put(key string, data []byte, meta string) driver.ETag {
	b.version++
	etag := driver.ETag(strconv.AppendUint(append(make([]byte, 0, 20), `"0x`...), b.version, 16)) + `"`
	b.docs[key] = driver.Item{Key: key, Data: data, Meta: meta, ETag: etag}
	return etag
}

// commit applies actions atomically (driver.Abilities.Commit): every
// condition is checked, in order, before any action is applied; a key may
// appear once; a check writes nothing. A refusal is a *driver.ActionError.
func (b *Backend) commit(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(actions))
	data := make([][]byte, len(actions))
	for i, a := range actions {
		err := a.Write.Cond.Check()
		if err == nil && !a.Delete && !a.Check {
			err = b.check(a.Key, a.Write)
		}
		if err == nil && seen[a.Key] {
			err = fmt.Errorf("%w: %q appears twice in the commit", driver.ErrInvalidInput, a.Key)
		}
		if err != nil {
			return nil, &driver.ActionError{Index: i, Err: err}
		}
		seen[a.Key], data[i] = true, bytes.Clone(a.Write.Data)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, a := range actions {
		cur, exists := b.docs[a.Key]
		if err := precondition(a.Key, a.Write.Cond, cur, exists); err != nil {
			return nil, &driver.ActionError{Index: i, Err: err}
		}
	}
	etags := make([]driver.ETag, len(actions))
	for i, a := range actions {
		switch {
		case a.Check: // checked above; nothing to write
		case a.Delete:
			delete(b.docs, a.Key)
		default:
			etags[i] = b.put(a.Key, data[i], a.Write.Meta)
		}
	}
	return etags, nil
}

// Delete removes key if its ETag is etag; see driver.Backend.
func (b *Backend) Delete(ctx context.Context, key string, etag driver.ETag) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cond := driver.IfMatch(etag)
	if err := cond.Check(); err != nil {
		return err
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

// precondition applies Azure's rules for cond to the current state.
func precondition(key string, cond driver.Cond, cur driver.Item, exists bool) error {
	switch cond.Kind {
	case driver.CondCreate:
		if exists {
			return fmt.Errorf("%w: %q", driver.ErrExists, key)
		}
	case driver.CondIfMatch:
		if !exists {
			return fmt.Errorf("%w: %q", driver.ErrNotFound, key)
		}
		if cond.ETag != driver.ETagAny && cond.ETag != cur.ETag {
			return fmt.Errorf("%w: %q is at %s, not %s", driver.ErrConflict, key, cur.ETag, cond.ETag)
		}
	}
	return nil
}

// List yields the items whose key starts with prefix, in key order (by
// UTF-16 code units, as Azure's services order keys), from a snapshot taken
// when iteration starts.
func (b *Backend) List(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(driver.Item{}, err)
			return
		}
		b.mu.RLock()
		var items []driver.Item
		for k, it := range b.docs {
			if strings.HasPrefix(k, prefix) {
				items = append(items, it)
			}
		}
		b.mu.RUnlock()
		slices.SortFunc(items, func(a, b driver.Item) int { return driver.CompareKeys(a.Key, b.Key) })
		for _, it := range items {
			it.Data = bytes.Clone(it.Data)
			if !yield(it, nil) {
				return
			}
		}
	}
}

// ListPage returns up to limit items whose key starts with prefix and
// sorts after the key after, in key order (driver.CompareKeys), and
// whether more follow; see driver.Backend.
func (b *Backend) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	b.mu.RLock()
	var items []driver.Item
	for k, it := range b.docs {
		if strings.HasPrefix(k, prefix) && driver.CompareKeys(k, after) > 0 {
			items = append(items, it)
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(items, func(a, b driver.Item) int { return driver.CompareKeys(a.Key, b.Key) })
	more := len(items) > limit
	items = items[:min(len(items), limit)]
	for i := range items {
		items[i].Data = bytes.Clone(items[i].Data)
	}
	return items, more, nil
}
