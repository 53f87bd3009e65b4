package cache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/etagstore/etagstore/driver"
)

// The cache holds at most its number of keys and MaxBytes of data, and
// keeps no document over MaxBytes/16.
func TestCacheBounds(t *testing.T) {
	c := New(0)
	if c.max != DefaultSize {
		t.Fatalf("default size %d, want %d", c.max, DefaultSize)
	}
	big := []byte(strings.Repeat("x", MaxBytes/64)) // 64 such fill the budget
	for i := range 3 * DefaultSize {
		data := []byte("{}")
		if i%3 == 0 {
			data = big
		}
		c.Put(fmt.Sprint("k", i), driver.Item{Data: data}, Notes{})
		if len(c.m) > c.max || c.bytes > MaxBytes {
			t.Fatalf("after %d puts: %d keys, %d bytes; bounds %d, %d", i+1, len(c.m), c.bytes, c.max, MaxBytes)
		}
	}
	sum := 0
	for k, it := range c.m {
		sum += len(k) + cap(it.Data)
	}
	if sum != c.bytes {
		t.Fatalf("bytes %d, entries hold %d", c.bytes, sum)
	}
	c.Put("huge", driver.Item{Data: make([]byte, MaxBytes/16+1)}, Notes{})
	if _, ok := c.Get("huge"); ok {
		t.Error("a document over MaxBytes/16 was kept")
	}
	c.Put("k1", driver.Item{Data: []byte("{}")}, Notes{})
	c.Put("k1", driver.Item{Data: []byte(`{"a":1}`)}, Notes{}) // replacing counts once
	c.Drop("k1")
	if _, ok := c.Get("k1"); ok {
		t.Error("a dropped key is still kept")
	}
	if New(-1) != nil {
		t.Error("a negative size made a cache")
	}
}

// A full cache evicts entries used long ago, not lately: after twice its
// size of new keys, the newest eighth are all kept, and so is an old key
// that was read (Get) all along.
func TestCacheKeepsRecentlyUsed(t *testing.T) {
	const size = 1024
	c := New(size)
	c.Put("old", driver.Item{ETag: "e"}, Notes{})
	for i := range 2 * size {
		c.Put(fmt.Sprint("k", i), driver.Item{ETag: "e"}, Notes{})
		if i%(size/16) == 0 {
			if _, ok := c.Get("old"); !ok {
				t.Fatalf("after %d puts: the key read every %d puts was evicted", i+1, size/16)
			}
		}
	}
	for i := 2*size - size/8; i < 2*size; i++ {
		if _, ok := c.Get(fmt.Sprint("k", i)); !ok {
			t.Errorf("k%d, among the newest eighth, was evicted", i)
		}
	}
	if len(c.m) != size {
		t.Errorf("%d keys, want %d", len(c.m), size)
	}
}
