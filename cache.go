package etagstore

import (
	"errors"
	"sync"

	"github.com/etagstore/etagstore/driver"
)

// itemCache keeps the last version a Store read or wrote of up to max keys,
// so that an Update can write against it at once (one request when it is
// still current) instead of reading first. A nil *itemCache is off.
type itemCache struct {
	mu  sync.Mutex
	max int
	m   map[string]driver.Item
}

func newItemCache(max int) *itemCache {
	if max <= 0 {
		return nil
	}
	return &itemCache{max: max, m: make(map[string]driver.Item, max)}
}

func (c *itemCache) get(key string) (driver.Item, bool) {
	if c == nil {
		return driver.Item{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.m[key]
	return it, ok
}

func (c *itemCache) put(key string, it driver.Item) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		for k := range c.m { // evict one entry, chosen by map order
			delete(c.m, k)
			break
		}
	}
	c.m[key] = it
}

func (c *itemCache) drop(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
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
