package etagstore_test

// Many goroutines Update and Transact the same few keys at once, through
// group commit (both kinds' batches share internal/groupcommit): counters
// must be exact, and, with contexts cancelled at random moments, each
// caller's result must tell the truth about its own mutation: success means
// written exactly once, ctx.Err() means not written, *OutcomeUnknownError
// means at most once.
import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

func TestUpdateAndTransactStormExactCounters(t *testing.T) {
	for _, cache := range []int{0, -1} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) {
			s := etagstore.New[counter](memstore.New(nil), &etagstore.Options{CacheSize: cache})
			ctx := context.Background()
			const keys, goroutines, each = 8, 64, 40
			var want [keys]atomic.Int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for i := range each {
						k := r.IntN(keys)
						key := fmt.Sprintf("k%d", k)
						var err error
						switch {
						case i%5 == 4:
							_, err = s.Transact(ctx, increment(key))
						case i%7 == 6:
							// two keys in one transaction
							k2 := (k + 1) % keys
							_, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
								if err := increment(key)(tx); err != nil {
									return err
								}
								return increment(fmt.Sprintf("k%d", k2))(tx)
							})
							if err == nil {
								want[k2].Add(1)
							}
						default:
							_, err = s.Update(ctx, key, func(c *counter) error { c.N++; return nil }, etagstore.CreateIfMissing())
						}
						if err != nil {
							t.Errorf("g%d op %d on %s: %v", g, i, key, err)
							continue
						}
						want[k].Add(1)
					}
				})
			}
			wg.Wait()
			for k := range keys {
				d, err := s.Get(ctx, fmt.Sprintf("k%d", k))
				if err != nil && want[k].Load() != 0 {
					t.Fatal(err)
				}
				if int64(d.Value.N) != want[k].Load() {
					t.Errorf("k%d: stored %d, want %d", k, d.Value.N, want[k].Load())
				}
			}
		})
	}
}

func TestUpdateAndTransactRandomCancelsTellTheTruth(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow=%v", slow), func(t *testing.T) { randomCancels(t, slow) })
	}
}

func randomCancels(t *testing.T, slow bool) {
	hb := &hookBackend{Backend: memstore.New(nil)}
	if slow {
		// The write lands after some yields and its answer comes after more,
		// ignoring ctx as a request already on the wire does: leavers meet
		// a write in flight.
		hb.writeHook = func(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
			for range 20 {
				runtime.Gosched()
			}
			e, err := hb.Backend.Write(context.Background(), key, w)
			for range 20 {
				runtime.Gosched()
			}
			return e, err, true
		}
	}
	s := etagstore.New[logDoc](hb, nil)
	ctx := context.Background()
	const keys, goroutines, each = 4, 48, 30
	for k := range keys {
		if _, err := s.Create(ctx, fmt.Sprintf("k%d", k), logDoc{}); err != nil {
			t.Fatal(err)
		}
	}
	type outcome struct {
		key string
		err error
	}
	var mu sync.Mutex
	outcomes := map[string]outcome{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range each {
				key := fmt.Sprintf("k%d", r.IntN(keys))
				id := fmt.Sprintf("g%d.%d", g, i)
				cctx, cancel := context.WithCancel(ctx)
				if r.IntN(3) > 0 {
					n := r.IntN(200)
					go func() {
						for range n {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				var err error
				if i%4 == 3 {
					_, err = s.Transact(cctx, func(tx *etagstore.Tx[logDoc]) error {
						d, err := tx.Get(key)
						if err != nil {
							return err
						}
						d.Log = append(d.Log, id)
						return tx.Put(key, d)
					})
				} else {
					_, err = s.Update(cctx, key, appendLog(id))
				}
				cancel()
				mu.Lock()
				outcomes[id] = outcome{key, err}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	counts := map[string]int{}
	for k := range keys {
		d, err := s.Get(ctx, fmt.Sprintf("k%d", k))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range d.Value.Log {
			counts[id]++
		}
	}
	var ok, canceled, unknown int
	for id, o := range outcomes {
		n := counts[id]
		switch {
		case o.err == nil:
			ok++
			if n != 1 {
				t.Errorf("%s succeeded on %s but is stored %d times", id, o.key, n)
			}
		case errors.Is(o.err, etagstore.ErrOutcomeUnknown):
			unknown++
			if n > 1 {
				t.Errorf("%s unknown but stored %d times", id, n)
			}
		case errors.Is(o.err, context.Canceled):
			canceled++
			if n != 0 {
				t.Errorf("%s got %v (nothing sent) but is stored %d times", id, o.err, n)
			}
		default:
			t.Errorf("%s: unexpected %v", id, o.err)
		}
	}
	t.Logf("ok %d canceled %d unknown %d", ok, canceled, unknown)
}
