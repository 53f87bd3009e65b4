package etagstore_test

// Update with CreateIfMissing and plain Update of the same missing keys at
// once: they form two groups per key (groupKey.create), committing
// concurrently. Each success counts exactly once; a plain Update that finds
// the key missing fails with ErrNotFound and writes nothing.
import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

func TestUpdateCreateIfMissingAndPlainGroupsOnMissingKeys(t *testing.T) {
	for round := range 5 {
		s := etagstore.New[counter](memstore.New(nil), nil)
		ctx := context.Background()
		const keys, goroutines, each = 4, 32, 20
		var ok [keys]atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					k := (g + i) % keys
					var opts []etagstore.UpdateOption
					if g%2 == 0 {
						opts = append(opts, etagstore.CreateIfMissing())
					}
					d, err := s.Update(ctx, fmt.Sprintf("k%d", k), func(c *counter) error { c.N++; return nil }, opts...)
					switch {
					case err == nil:
						ok[k].Add(1)
						if d.Value.N < 1 {
							t.Errorf("a success returned %+v", d.Value)
						}
					case len(opts) == 0 && errors.Is(err, etagstore.ErrNotFound):
					default:
						t.Errorf("round %d g%d: %v", round, g, err)
					}
				}
			})
		}
		wg.Wait()
		for k := range keys {
			d, err := s.Get(ctx, fmt.Sprintf("k%d", k))
			if err != nil {
				t.Fatal(err)
			}
			if int64(d.Value.N) != ok[k].Load() {
				t.Errorf("round %d k%d: stored %d, %d successes", round, k, d.Value.N, ok[k].Load())
			}
		}
	}
}
