// Package memstore is an in-memory driver.Backend with the concurrency
// semantics of Azure Storage: a new ETag on every write, 412 on a stale
// If-Match, 409 on creating an existing key, 404 on a missing key, the "*"
// wildcard, and the unconditional upsert bypass.
//
// It is a backend in its own right, for demos, tests of code built on
// etagstore, and single-process use; it passes the same conformance suite
// (storetest) as the Azure backends.
//
// Documents are kept as the bytes written, never copied: Write keeps
// w.Data and Read, List and ListPage return it (driver.Item's contract:
// Data is read-only once written). Keys are kept in a B-tree in key order
// beside the map that finds them, so that a page costs O(log n + page
// size) however many documents the backend holds.
//
// Every call that reaches the documents is one request in the Store's
// etagstore.requests metric (a List: one per 256 items), as one HTTP
// request is on Azure.
//
// Keys starting with U+FFFF are reserved: ValidateKey refuses them. The
// backend keeps index entries (driver.Abilities.Entries) under them, in
// its one commit scope (Entries.Scope returns ""): the entry named name
// is the key "\uFFFFe." + name. Entries live beside the documents, in
// the same map and key order, so that Read returns them and Commit
// writes, deletes and checks them with documents atomically; List and
// ListPage skip every reserved key unless the prefix itself is reserved
// (starts with U+FFFF), so that a listing of a user's prefix never yields
// an entry and one of a prefix Entries.Key made yields only entries.
// ReadMany refuses reserved keys other than index entries'.
package memstore

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"

	"github.com/google/btree"

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
	keys    *btree.BTreeG[string] // the keys of docs, in key order (compareKeys)
	fences  map[string]int64      // the fencing tokens fenced deletes and creates kept (driver.ModeTombstone)
	version uint64                // bumped on every write; never reused, so ETags are unique
}

// treeDegree is the B-tree's degree: nodes of 31 to 63 keys, as in etcd's
// key index.
const treeDegree = 32

var _ driver.Backend = (*Backend)(nil)

// New returns an empty Backend. Nil opts means the defaults.
func New(opts *Options) *Backend {
	b := &Backend{docs: make(map[string]driver.Item), keys: btree.NewG(treeDegree, lessKey), fences: make(map[string]int64)}
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
// that several writes over any keys can be committed atomically, with
// checks that write nothing and check absence exactly (PureChecks), and
// that a fenced delete keeps the key's fencing token (Tombstones: in a map
// beside the documents, which no read or listing sees), that several
// keys can be read at one instant (ReadMany), and that it keeps index
// entries under reserved keys (Entries; see the package documentation).
// memstore cannot merge (driver.ModeMerge).
func (b *Backend) Abilities() driver.Abilities {
	return driver.Abilities{Verbatim: true, Commit: b.commit, PureChecks: true, Tombstones: true, MaxKeyLen: b.opts.MaxKeyLen, ReadMany: b.readMany,
		VersionsBetween: b.versionsBetween, Entries: &driver.Entries{Scope: b.entryScope, Key: entryKey, Range: b.entryRange}}
}

// reservedPrefix starts every key ValidateKey refuses because the backend
// keeps its own records under it: index entries (entryPrefix).
const reservedPrefix = "\uFFFF"

// entryPrefix starts the key of every index entry: the entry named name
// is entryPrefix + name.
const entryPrefix = reservedPrefix + "e."

// reserved reports whether key is one of the backend's own (an index
// entry), not a document key a user may write or list.
func reserved(key string) bool { return strings.HasPrefix(key, reservedPrefix) }

// entryScope is Entries.Scope: memstore is one commit scope, "", and a
// key has no part naming it to validate, so every key is in it (what
// follows the scope may be an index's value, of any characters).
func (b *Backend) entryScope(string) (string, error) { return "", nil }

// entryKey is Entries.Key: the reserved key of the entry named name in
// scope (always "").
func entryKey(scope, name string) string { return scope + entryPrefix + name }

// entryRange is Entries.Range: the entries named from up to below, from
// a listing of their common prefix.
func (b *Backend) entryRange(ctx context.Context, from, below string) iter.Seq2[driver.Item, error] {
	common := 0
	for common < len(from) && common < len(below) && from[common] == below[common] {
		common++
	}
	lo, hi := entryKey("", from), entryKey("", below)
	return func(yield func(driver.Item, error) bool) {
		for it, err := range b.List(ctx, entryKey("", from[:common])) {
			switch {
			case err != nil:
				yield(driver.Item{}, err)
				return
			case it.Key >= hi:
				return
			case it.Key < lo:
				continue
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}

// As sets a **memstore.Backend target to b.
func (b *Backend) As(target any) bool {
	if p, ok := target.(**Backend); ok {
		*p = b
		return true
	}
	return false
}

// ValidateKey accepts keys of at most MaxKeyLen bytes that do not start
// with U+FFFF (reserved for index entries: see the package
// documentation); otherwise the error matches driver.ErrInvalidKey. (The
// Store has applied driver.CheckKey.)
func (b *Backend) ValidateKey(key string) error {
	if len(key) > b.opts.MaxKeyLen {
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", driver.ErrInvalidKey, len(key), b.opts.MaxKeyLen)
	}
	if reserved(key) {
		return fmt.Errorf("%w: key %q starts with U+FFFF, which memstore keeps for its index entries", driver.ErrInvalidKey, key)
	}
	return nil
}

// Read returns the item under key, or an error matching driver.ErrNotFound.
// Its Data is the slice written, shared: read-only, as driver.Item says.
func (b *Backend) Read(ctx context.Context, key string) (driver.Item, error) {
	if err := ctx.Err(); err != nil {
		return driver.Item{}, err
	}
	b.mu.RLock()
	it, ok := b.docs[key]
	b.mu.RUnlock()
	if !ok {
		return driver.Item{}, driver.Sent(ctx, fmt.Errorf("%w: %q", driver.ErrNotFound, key))
	}
	driver.Sent(ctx, nil)
	return it, nil
}

// readMany is Abilities.ReadMany: keys read at one instant, under the
// lock, as one request. A missing key's Item has only its Key; a key
// ValidateKey refuses, unless an index entry's, fails the call, and
// nothing is read.
func (b *Backend) readMany(ctx context.Context, keys []string) ([]driver.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, key := range keys {
		if err := b.ValidateKey(key); err != nil && !strings.HasPrefix(key, entryPrefix) {
			return nil, err
		}
	}
	items := make([]driver.Item, len(keys))
	if len(keys) == 0 {
		return items, nil // nothing to read: no request
	}
	b.mu.RLock()
	for i, key := range keys {
		if it, ok := b.docs[key]; ok {
			items[i] = it
		} else {
			items[i] = driver.Item{Key: key}
		}
	}
	b.mu.RUnlock()
	driver.Sent(ctx, nil)
	return items, nil
}

// Write stores w under key if w.Cond holds; see driver.Backend. It keeps
// w.Data itself, not a copy (driver.Write's contract).
func (b *Backend) Write(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := b.check(key, w); err != nil {
		return "", err
	}
	b.mu.Lock()
	var etag driver.ETag
	cur, exists := b.docs[key]
	err := b.precondition(key, w, cur, exists)
	switch {
	case err != nil:
	case w.Mode == driver.ModeTombstone:
		b.bury(key, w.Meta)
	default:
		etag = b.put(key, w.Data, w.Meta, exists)
	}
	b.mu.Unlock()
	return etag, driver.Sent(ctx, err)
}

// check refuses, before anything changes, a write memstore cannot make.
func (b *Backend) check(key string, w driver.Write) error {
	if err := w.Cond.Check(); err != nil {
		return err
	}
	switch {
	case w.Mode == driver.ModeMerge:
		return fmt.Errorf("%w: memstore cannot merge %q", driver.ErrInvalidInput, key)
	case w.Mode == driver.ModeTombstone && w.Cond.Kind != driver.CondIfMatch:
		return fmt.Errorf("%w: a tombstone of %q deletes a version (CondIfMatch)", driver.ErrInvalidInput, key)
	case w.Mode > driver.ModeTombstone:
		return fmt.Errorf("%w: unknown write mode %d for %q", driver.ErrInvalidInput, w.Mode, key)
	}
	if len(w.Data) > b.opts.MaxDocSize {
		return fmt.Errorf("%w: document %q is %d bytes, the limit is %d", driver.ErrTooLarge, key, len(w.Data), b.opts.MaxDocSize)
	}
	return nil
}

// put stores data under key as a new version and returns its ETag;
// existed says whether key was there before. b.mu is held. data's
// capacity is cut to its length, so that a reader's append copies rather
// than writing past the end into memory another reader may append to.
func (b *Backend) put(key string, data []byte, meta string, existed bool) driver.ETag {
	b.version++
	var buf [24]byte
	etag := driver.ETag(append(strconv.AppendUint(append(buf[:0], `"0x`...), b.version, 16), '"'))
	b.docs[key] = driver.Item{Key: key, Data: data[:len(data):len(data)], Meta: meta, ETag: etag}
	if !existed {
		b.keys.ReplaceOrInsert(key)
		if f := driver.FenceOf(meta); f > 0 {
			b.fences[key] = f // a fenced create raises the token kept (no lower one got past it)
		}
	}
	return etag
}

// remove deletes key, which exists. b.mu is held.
func (b *Backend) remove(key string) {
	delete(b.docs, key)
	b.keys.Delete(key)
}

// bury deletes key, which exists, and keeps the fencing token meta carries
// (driver.ModeTombstone). b.mu is held.
func (b *Backend) bury(key, meta string) {
	b.remove(key)
	if f := driver.FenceOf(meta); f > 0 {
		b.fences[key] = f
	}
}

// commit applies actions atomically (driver.Abilities.Commit): every
// condition is checked, in order, before any action is applied; a key may
// appear once; a check writes nothing. A refusal is a *driver.ActionError.
func (b *Backend) commit(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(actions))
	for i, a := range actions {
		err := a.Write.Cond.Check()
		if err == nil && (!a.Delete && !a.Check || a.Write.Mode == driver.ModeTombstone) {
			err = b.check(a.Key, a.Write)
		}
		if err == nil && seen[a.Key] {
			err = fmt.Errorf("%w: %q appears twice in the commit", driver.ErrInvalidInput, a.Key)
		}
		if err != nil {
			return nil, &driver.ActionError{Index: i, Err: err}
		}
		seen[a.Key] = true
	}
	etags, err := b.apply(actions)
	return etags, driver.Sent(ctx, err)
}

// apply is commit of actions already checked, under the lock.
func (b *Backend) apply(actions []driver.Action) ([]driver.ETag, error) {
	existed := make([]bool, len(actions))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, a := range actions {
		cur, exists := b.docs[a.Key]
		w := a.Write
		if a.Check {
			w.Meta = "" // a check carries no token to refuse
		}
		if err := b.precondition(a.Key, w, cur, exists); err != nil {
			return nil, &driver.ActionError{Index: i, Err: err}
		}
		existed[i] = exists
	}
	etags := make([]driver.ETag, len(actions))
	for i, a := range actions {
		switch {
		case a.Check: // checked above; nothing to write
		case a.Delete && a.Write.Mode == driver.ModeTombstone:
			b.bury(a.Key, a.Write.Meta)
		case a.Delete:
			b.remove(a.Key)
		default:
			etags[i] = b.put(a.Key, a.Write.Data, a.Write.Meta, existed[i])
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
	cur, exists := b.docs[key]
	err := b.precondition(key, driver.Write{Cond: cond}, cur, exists)
	if err == nil {
		b.remove(key)
	}
	b.mu.Unlock()
	return driver.Sent(ctx, err)
}

// precondition applies Azure's rules for w's condition to the current
// state, and refuses a create carrying a lower fencing token than a fenced
// delete of the key kept (driver.ModeTombstone). b.mu is held.
func (b *Backend) precondition(key string, w driver.Write, cur driver.Item, exists bool) error {
	switch cond := w.Cond; cond.Kind {
	case driver.CondCreate:
		if exists {
			return fmt.Errorf("%w: %q", driver.ErrExists, key)
		}
		if kept, f := b.fences[key], driver.FenceOf(w.Meta); f > 0 && f < kept {
			return fmt.Errorf("%w: %q was deleted under fencing token %d, the create carries %d", driver.ErrFenced, key, kept, f)
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
