package etagstore

import (
	"errors"
	"sync"

	"github.com/etagstore/etagstore/driver"
)

// The version cache is on by default: an Update of a key this Store wrote
// or read lately writes against the version it kept, at once, and sends one
// request when no other writer came in between. A key on which the kept
// version turned out stale (another process wrote it) is marked shared:
// its Updates read first again, as without the cache, until it has been
// quiet for a while (two windows of the contention heat, see retry.go).
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
	bytes int // the Data the entries hold
	m     map[string]cacheEntry

	shared contention // keys another writer changed behind a kept version
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
	return &itemCache{max: size, m: make(map[string]cacheEntry, min(size, 64))}
}

// cacheEntry is a kept version. plain says its Data is known to hold no
// member T does not know (a write of this Store's encoding of T): a write
// starting from it need not scan Data for them. value, when set, is a *T
// whose encoding is Data exactly, for a T whose values JSON decodes
// exactly (see exact.go): never changed once kept, and copied out.
type cacheEntry struct {
	driver.Item
	plain bool
	value any
	extra int // the memory value holds (at most), counted beside Data's
}

// size is the memory en holds, as the cache counts it.
func (en *cacheEntry) size(key string) int { return cap(en.Data) + len(key) + en.extra }

func (c *itemCache) get(key string) (driver.Item, bool) {
	en, ok := c.entry(key)
	return en.Item, ok
}

func (c *itemCache) entry(key string) (cacheEntry, bool) {
	if c == nil {
		return cacheEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	en, ok := c.m[key]
	return en, ok
}

// base returns the kept version of key for a write to start from, unless
// the key is shared (see stale), as the version c makes of it (not
// verified).
func (c *itemCache) base(key string, clock Clock, s *core) (version, bool) {
	if c == nil || c.shared.current(key, clock) {
		return version{}, false
	}
	en, ok := c.entry(key)
	if !ok {
		return version{}, false
	}
	if en.plain {
		v := s.storedPlain(en.Item, false)
		v.value = en.value
		return v, true
	}
	return s.stored(en.Item, false), true
}

// put keeps it as key's version.
func (c *itemCache) put(key string, it driver.Item) { c.keep(key, cacheEntry{Item: it}) }

// putPlain keeps it as key's version, known to hold only members T knows,
// with v (nil, or what value says; it holds at most size bytes).
func (c *itemCache) putPlain(key string, it driver.Item, v keptValue) {
	c.keep(key, cacheEntry{Item: it, plain: true, value: v.value, extra: v.size})
}

func (c *itemCache) keep(key string, en cacheEntry) {
	if c == nil {
		return
	}
	size := en.size(key) // the memory the entry holds
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
	if size > cacheBytes/16 {
		return // too large to keep
	}
	for k := range c.m { // evict entries, chosen by map order, until it fits
		if len(c.m) < c.max && c.bytes+size <= cacheBytes {
			break
		}
		c.remove(k)
	}
	c.m[key] = en
	c.bytes += size
}

// remove deletes key's entry; c.mu is held.
func (c *itemCache) remove(key string) {
	if old, ok := c.m[key]; ok {
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
		c.shared.learn(key, 2, clock)
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
