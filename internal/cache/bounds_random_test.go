package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/retry"
)

// random Puts (of new and kept keys, of sizes up to MaxBytes/16),
// Gets, Drops and Stales keep the cache within its bounds, with its byte
// count equal to what its entries hold.
func TestCacheBoundsRandomUse(t *testing.T) {
	for _, size := range []int{1, 2, 9, 64} {
		c := New(size)
		r := rand.New(rand.NewPCG(1, uint64(size)))
		for i := range 20000 {
			key := fmt.Sprint("k", r.IntN(3*size+2))
			switch r.IntN(6) {
			case 0, 1, 2:
				n := 2
				if r.IntN(4) == 0 {
					n = r.IntN(MaxBytes/16 + 2)
				}
				c.Put(key, driver.Item{ETag: "e", Data: make([]byte, n)}, Notes{})
			case 3:
				c.Get(key)
			case 4:
				c.Drop(key)
			case 5:
				c.Stale(key, "e", retry.System{})
			}
			sum := 0
			for k, en := range c.m {
				sum += en.size(k)
			}
			if len(c.m) > c.max || c.bytes > MaxBytes || sum != c.bytes {
				t.Fatalf("size %d, step %d: %d keys, %d bytes counted, %d held; bounds %d, %d", size, i, len(c.m), c.bytes, sum, c.max, MaxBytes)
			}
		}
	}
}
