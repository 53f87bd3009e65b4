// Package cache is a Store's version cache: the last version the Store
// read or wrote of its recent keys, so that an Update can write against
// it at once instead of reading first.
package cache

import (
	"errors"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/meta"
)

// The version cache is on by default: an Update of a key this Store wrote
// or read lately writes against the version it kept, at once, and sends one
// request when no other writer came in between. A key on which the kept
// version proved stale (another process wrote it) is marked shared:
// its Updates read first again, as without the cache, until it has been
// quiet for a while (two windows of sharedWindow).
// So where a kept ETag is usually stale the cache costs one failed write
// per key now and then, not one per Update.

const (
	// DefaultSize is how many keys the cache keeps when
	// Options.CacheSize is 0.
	DefaultSize = 1024
	// MaxBytes bounds the document data a cache keeps; a document over
	// MaxBytes/16 is not kept.
	MaxBytes = 16 << 20
)

// Cache keeps the last version a Store read or wrote of up to max keys
// and MaxBytes of data, so that an Update can write against it at once
// instead of reading first. A nil *Cache is off.
type Cache struct {
	mu    sync.Mutex
	max   int
	bytes int // the memory the entries hold (see Entry.size)
	m     map[string]*Entry
	clock uint64 // counts the puts and takes, stamping Entry.used

	shared shared // keys another writer changed behind a kept version
}

// New returns a cache of size keys: 0 means DefaultSize, a
// negative size no cache.
func New(size int) *Cache {
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = DefaultSize
	}
	return &Cache{max: size, m: make(map[string]*Entry, min(size, 64))}
}

// Entry is a kept version, and what the write that made it knew of it
// (nothing, for a version read). A key's entry is reused by its next
// version; it is read and changed under Cache.mu only.
type Entry struct {
	driver.Item
	Notes
	used uint64 // when it was last put or taken (Cache.clock): eviction takes the least recent of a sample
}

// Notes are what a write of this Store knows of the version it made,
// beyond the item, so that a write starting from it need not work it out
// again.
type Notes struct {
	Canonical  bool      // Data is exactly what the Store's codec makes of its value
	Parsed     bool      // ParsedMeta holds Item.Meta parsed
	ParsedMeta meta.Meta // Item.Meta parsed, when Parsed
}

// size is the memory en holds, as the cache counts it.
func (en *Entry) size(key string) int { return cap(en.Data) + len(key) }

func (c *Cache) Get(key string) (driver.Item, bool) {
	en, ok := c.entry(key)
	return en.Item, ok
}

// entry returns a copy of key's entry.
func (c *Cache) entry(key string) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if en := c.m[key]; en != nil {
		c.touch(en)
		return *en, true
	}
	return Entry{}, false
}

// touch stamps en used now; c.mu is held.
func (c *Cache) touch(en *Entry) {
	c.clock++
	en.used = c.clock
}

// Base returns the kept version of key for a write to start from, unless
// the key is shared (see Stale).
func (c *Cache) Base(key string, clock engine.Clock) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if en := c.m[key]; en != nil && !c.shared.has(key, clock) {
		c.touch(en)
		return *en, true
	}
	return Entry{}, false
}

// Put holds it as key's version, with what the write that made it knew
// of it (nothing, for a version read).
func (c *Cache) Put(key string, it driver.Item, w Notes) {
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
	if size > MaxBytes/16 { // too large to keep
		if en != nil {
			delete(c.m, key)
		}
		return
	}
	c.makeRoom(key, size, en == nil)
	if en == nil {
		en = new(Entry)
		c.m[key] = en
	}
	en.Item, en.Notes = it, w
	c.touch(en)
	c.bytes += size
}

// makeRoom evicts entries other than key's until size bytes more fit,
// and one key more when adding: each time the least recently used of a
// sample of evictSample entries (map order picks them), so that the
// entries used lately stay (a write of a key made moments ago, a Create
// of a key another caller just made, finds it) at the cost of a few steps
// of the map, not of a list kept in order on every use. c.mu is held.
func (c *Cache) makeRoom(key string, size int, adding bool) {
	keys := len(c.m)
	if adding {
		keys++
	}
	for keys > c.max || c.bytes+size > MaxBytes {
		victim, seen := "", 0
		var oldest uint64
		for k, en := range c.m {
			if k == key {
				continue
			}
			if victim == "" || en.used < oldest {
				victim, oldest = k, en.used
			}
			if seen++; seen == evictSample {
				break
			}
		}
		if victim == "" {
			return // key's alone: it replaces itself
		}
		c.remove(victim)
		keys--
	}
}

// evictSample is how many entries an eviction compares: the one it takes
// is among the most recently used eighth of the cache only when all eight
// are, with odds of 1 in 8^8 (about 6 in 100 million).
const evictSample = 8

// remove deletes key's entry; c.mu is held.
func (c *Cache) remove(key string) {
	if old := c.m[key]; old != nil {
		c.bytes -= old.size(key)
		delete(c.m, key)
	}
}

func (c *Cache) Drop(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
}

// Stale drops key's kept version: a write conditioned on etag, a version
// not read in this call, found it out of date. If the version kept was
// that one, the key is marked shared: writes to it read first for a while.
// (A Save from an old Doc of the caller's is no sign of another writer.)
func (c *Cache) Stale(key string, etag driver.ETag, clock engine.Clock) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, ok := c.m[key]; ok && kept.ETag == etag {
		c.shared.add(key, clock)
	}
	c.remove(key)
}

// Note records the outcome of a read: the version read, or its absence.
func (c *Cache) Note(key string, it driver.Item, err error) {
	switch {
	case err == nil:
		c.Put(key, it, Notes{})
	case errors.Is(err, driver.ErrNotFound):
		c.Drop(key)
	}
}

// shared is the set of keys marked shared lately: a key is kept for
// between one and two windows of sharedWindow after it was last marked,
// so that the set is bounded by the keys marked lately. Read and changed
// under Cache.mu.
type shared struct {
	cur, old map[string]struct{} // marked in this window, and in the one before
	since    time.Time           // when cur's window began
}

const sharedWindow = time.Minute

// add marks key shared.
func (s *shared) add(key string, clock engine.Clock) {
	s.rotate(clock.Now())
	delete(s.old, key)
	if s.cur == nil {
		s.cur = map[string]struct{}{}
	}
	s.cur[key] = struct{}{}
}

// has reports whether key is marked shared; the clock is read only when
// some key is.
func (s *shared) has(key string, clock engine.Clock) bool {
	if len(s.cur) == 0 && len(s.old) == 0 {
		return false
	}
	s.rotate(clock.Now())
	_, cur := s.cur[key]
	_, old := s.old[key]
	return cur || old
}

// rotate starts a new window when the current one is over; two windows
// after it was last marked a key is gone.
func (s *shared) rotate(now time.Time) {
	switch {
	case s.since.IsZero():
		s.since = now
	case now.Sub(s.since) >= 2*sharedWindow:
		s.cur, s.old, s.since = nil, nil, now
	case now.Sub(s.since) >= sharedWindow:
		s.cur, s.old, s.since = nil, s.cur, now
	}
}
