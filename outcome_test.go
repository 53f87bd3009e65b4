package etagstore_test

// A write that landed although its answer says it did not.
import (
	"context"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"

	"github.com/etagstore/etagstore/driver"
)

// A write that lands but is answered with a plain 412 (a retry below the
// Store got it) is recognised as landed — also when the base it started
// from was a cached (or chained) copy rather than a read — so the mutation
// is applied once.
func landedWriteAnswered412(t *testing.T, cache int) {
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[counter](hb, &etagstore.Options{CacheSize: cache, DisableGroupCommit: false})
	ctx := context.Background()
	if _, err := s.Create(ctx, "k", counter{}); err != nil { // write 1 (cached)
		t.Fatal(err)
	}
	landed := 0
	hb.writeHook = func(_ context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
		if nOf(w.Data) == 1 { // the Update's write lands, and its answer is lost
			landed++
			if _, err := hb.Backend.Write(context.Background(), key, w); err != nil {
				t.Errorf("inner: %v", err)
			}
			return "", etagstore.ErrConflict, true // the answer to the layer's retry
		}
		return "", nil, false
	}
	calls := 0
	d, err := s.Update(ctx, "k", func(c *counter) error { calls++; c.N++; return nil })
	got, _ := s.Get(ctx, "k")
	t.Logf("cache=%d: Update -> %+v, %v; mutate ran %d times; stored N=%d", cache, d.Value, err, calls, got.Value.N)
	if got.Value.N != 1 || landed != 1 {
		t.Errorf("cache=%d: one Update, stored N=%d after %d landed writes answered 412 (want 1)", cache, got.Value.N, landed)
	}
}

func TestWriteLandedButAnswered412IsAppliedOnce(t *testing.T) {
	landedWriteAnswered412(t, 0)
}

func TestWriteLandedButAnswered412FromACachedBaseIsAppliedOnce(t *testing.T) {
	landedWriteAnswered412(t, 8)
}
