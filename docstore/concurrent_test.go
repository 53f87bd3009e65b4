package docstore

import (
	"sync"
	"sync/atomic"
	"testing"

	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	"github.com/etagstore/etagstore/memstore"
)

// Concurrent atomic writes (one Store.Transact each, batched): CAS
// transfers with revisions keep a+b constant; atomic increments without
// a revision are each applied once; every failure is FailedPrecondition.
func TestAtomicWritesConcurrent(t *testing.T) {
	ctx := t.Context()
	coll, err := OpenCollection(memstore.New(nil), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	for _, n := range []string{"a", "b", "c"} {
		if err := coll.Create(ctx, &counter{Name: n, N: 100}); err != nil {
			t.Fatal(err)
		}
	}
	var incs, moves, stale atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 25 {
				if w%2 == 0 {
					err := coll.Actions().AtomicWrites().
						Update(&counter{Name: "c"}, docstore.Mods{"N": docstore.Increment(1)}).
						Update(&counter{Name: "a"}, docstore.Mods{"N": docstore.Increment(0)}).
						Do(ctx)
					if err != nil {
						t.Errorf("increment: %v", err)
						continue
					}
					incs.Add(1)
					continue
				}
				a, b := &counter{Name: "a"}, &counter{Name: "b"}
				if err := coll.Actions().Get(a).Get(b).Do(ctx); err != nil {
					t.Errorf("get: %v", err)
					continue
				}
				a.N--
				b.N++
				err := coll.Actions().AtomicWrites().Replace(a).Replace(b).Do(ctx)
				switch {
				case err == nil:
					moves.Add(1)
					if a.DocstoreRevision == nil || b.DocstoreRevision == nil {
						t.Errorf("no revision set")
					}
				case gcerrors.Code(err) == gcerrors.FailedPrecondition:
					stale.Add(1)
				default:
					t.Errorf("move: %v (%v)", err, gcerrors.Code(err))
				}
			}
		})
	}
	wg.Wait()
	a, b, c := &counter{Name: "a"}, &counter{Name: "b"}, &counter{Name: "c"}
	if err := coll.Actions().Get(a).Get(b).Get(c).Do(ctx); err != nil {
		t.Fatal(err)
	}
	if a.N+b.N != 200 || int64(b.N-100) != moves.Load() {
		t.Errorf("a=%d b=%d, %d moves", a.N, b.N, moves.Load())
	}
	if int64(c.N-100) != incs.Load() {
		t.Errorf("c=%d, %d increments", c.N, incs.Load())
	}
	t.Logf("%d moves, %d stale, %d increments", moves.Load(), stale.Load(), incs.Load())
}
