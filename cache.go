package etagstore

import (
	"errors"
	"sync"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/meta"
)

// The version cache is on by default: an Update of a key this Store wrote
// or read lately writes against the version it kept, at once, and sends one
// request when no other writer came in between. A key on which the kept
// version turned out stale (another process wrote it) is marked shared:
// its Updates read first again, as without the cache, until it has been
// quiet for a while (two windows of the contention heat, see internal/engine).
// So where a kept ETag is usually stale the cache costs one failed write
// per key now and then, not one per Update.

const (
	// defaultCacheSize is how many keys the cache keeps when
	// Options.CacheSize is 0.
	defaultCacheSize = 1024
	// cacheBytes bounds the document data a cache keeps; a document over
	// cacheBytes/16 is not kept.
	cacheBytes = 16 << 20
)

// itemCache keeps the last version a Store read or wrote of up to max keys
// and cacheBytes of data, so that an Update can write against it at once
// instead of reading first. A nil *itemCache is off.
type itemCache struct {
	mu    sync.Mutex
	max   int
	bytes int // the memory the entries hold (see cacheEntry.size)
	m     map[string]*cacheEntry

	shared engine.Heat // keys another writer changed behind a kept version
}

// newItemCache returns a cache of size keys: 0 means defaultCacheSize, a
// negative size no cache.
func newItemCache(size int) *itemCache {
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = defaultCacheSize
	}
	return &itemCache{max: size, m: make(map[string]*cacheEntry, min(size, 64))}
}

// cacheEntry is a kept version, and what the write that made it knew of it
// (nothing, for a version read). A key's entry is reused by its next
// version; it is read and changed under itemCache.mu only.
type cacheEntry struct {
	driver.Item
	notes
}

// notes are what a write of this Store knows of the version it made,
// beyond the item, so that a write starting from it need not work it out
// again.
type notes struct {
	plain  bool      // Data holds no member T does not know: no scan for them
	parsed bool      // meta is Item.Meta parsed
	meta   meta.Meta //
}

// size is the memory en holds, as the cache counts it.
func (en *cacheEntry) size(key string) int { return cap(en.Data) + len(key) }

func (c *itemCache) get(key string) (driver.Item, bool) {
	en, ok := c.entry(key)
	return en.Item, ok
}

// entry returns a copy of key's entry.
func (c *itemCache) entry(key string) (cacheEntry, bool) {
	if c == nil {
		return cacheEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if en := c.m[key]; en != nil {
		return *en, true
	}
	return cacheEntry{}, false
}

// base returns the kept version of key for a write to start from, unless
// the key is shared (see stale), as the version s makes of it (not
// verified).
func (c *itemCache) base(key string, clock Clock, s *core) (version, bool) {
	if c == nil || c.shared.Current(key, clock) {
		return version{}, false
	}
	en, ok := c.entry(key)
	switch {
	case !ok:
		return version{}, false
	case !en.plain:
		return s.stored(en.Item, false), true
	}
	v := s.storedPlain(en.Item, false)
	if en.parsed {
		v.Meta = en.meta
	} else {
		v.Meta = meta.Parse(en.Meta)
	}
	return v, true
}

// put keeps it as key's version.
func (c *itemCache) put(key string, it driver.Item) { c.keep(key, it, notes{}) }

// keep keeps it as key's version, with what the write that made it knew
// of it.
func (c *itemCache) keep(key string, it driver.Item, w notes) {
	if c == nil {
		return
	}
	size := cap(it.Data) + len(key) // the memory the entry holds
	c.mu.Lock()
	defer c.mu.Unlock()
	en := c.m[key]
	if en != nil {
		c.bytes -= en.size(key)
	}
	if size > cacheBytes/16 { // too large to keep
		if en != nil {
			delete(c.m, key)
		}
		return
	}
	c.makeRoom(key, size, en == nil)
	if en == nil {
		en = new(cacheEntry)
		c.m[key] = en
	}
	en.Item, en.notes = it, w
	c.bytes += size
}

// makeRoom evicts entries other than key's, chosen by map order, until
// size bytes more fit, and one key more when adding. c.mu is held.
func (c *itemCache) makeRoom(key string, size int, adding bool) {
	keys := len(c.m)
	if adding {
		keys++
	}
	fits := func() bool { return keys <= c.max && c.bytes+size <= cacheBytes }
	if fits() {
		return // (before ranging over the map, which costs even when it stops at once)
	}
	for k := range c.m {
		if fits() {
			return
		}
		if k != key {
			c.remove(k)
			keys--
		}
	}
}

// remove deletes key's entry; c.mu is held.
func (c *itemCache) remove(key string) {
	if old := c.m[key]; old != nil {
		c.bytes -= old.size(key)
		delete(c.m, key)
	}
}

func (c *itemCache) drop(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
}

// stale drops key's kept version: a write conditioned on etag, a version
// not read in this call, found it out of date. If the version kept was
// that one, the key is marked shared: writes to it read first for a while.
// (A Save from an old Doc of the caller's is no sign of another writer.)
func (c *itemCache) stale(key string, etag ETag, clock Clock) {
	if c == nil {
		return
	}
	c.mu.Lock()
	kept, ok := c.m[key]
	c.remove(key)
	c.mu.Unlock()
	if ok && kept.ETag == etag {
		c.shared.Learn(key, 2, clock)
	}
}

// note records the outcome of a read: the version read, or its absence.
func (c *itemCache) note(key string, it driver.Item, err error) {
	switch {
	case err == nil:
		c.put(key, it)
	case errors.Is(err, ErrNotFound):
		c.drop(key)
	}
}
