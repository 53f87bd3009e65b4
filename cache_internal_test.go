package etagstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/etagstore/etagstore/driver"
)

// The cache holds at most its number of keys and cacheBytes of data, and
// keeps no document over cacheBytes/16.
func TestCacheBounds(t *testing.T) {
	c := newItemCache(0)
	if c.max != defaultCacheSize {
		t.Fatalf("default size %d, want %d", c.max, defaultCacheSize)
	}
	big := []byte(strings.Repeat("x", cacheBytes/64)) // 64 such fill the budget
	for i := range 3 * defaultCacheSize {
		data := []byte("{}")
		if i%3 == 0 {
			data = big
		}
		c.put(fmt.Sprint("k", i), driver.Item{Data: data})
		if len(c.m) > c.max || c.bytes > cacheBytes {
			t.Fatalf("after %d puts: %d keys, %d bytes; bounds %d, %d", i+1, len(c.m), c.bytes, c.max, cacheBytes)
		}
	}
	sum := 0
	for k, it := range c.m {
		sum += len(k) + cap(it.Data)
	}
	if sum != c.bytes {
		t.Fatalf("bytes %d, entries hold %d", c.bytes, sum)
	}
	c.put("huge", driver.Item{Data: make([]byte, cacheBytes/16+1)})
	if _, ok := c.get("huge"); ok {
		t.Error("a document over cacheBytes/16 was kept")
	}
	c.put("k1", driver.Item{Data: []byte("{}")})
	c.put("k1", driver.Item{Data: []byte(`{"a":1}`)}) // replacing counts once
	c.drop("k1")
	if _, ok := c.get("k1"); ok {
		t.Error("a dropped key is still kept")
	}
	if newItemCache(-1) != nil {
		t.Error("a negative size made a cache")
	}
}
