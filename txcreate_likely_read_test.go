package etagstore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// The keys a batch's members create unread that their Stores' version
// caches hold (most likely taken) are read together, beside the batch's
// commit: one ReadMany for the batch, not one read per member.

// pointReads is lookedUp that also counts the point reads of each key.
type pointReads struct {
	*lookedUp
	mu sync.Mutex
	n  map[string]int
}

func (p *pointReads) Read(ctx context.Context, key string) (driver.Item, error) {
	p.mu.Lock()
	p.n[key]++
	p.mu.Unlock()
	return p.lookedUp.Read(ctx, key)
}

// armedRead is lookedUp whose first ReadMany after arm whose keys match
// is answered by answer instead of the backend: a shared read made to
// fail, or held.
type armedRead struct {
	*lookedUp
	armed  atomic.Bool
	match  func(keys []string) bool
	answer func(ctx context.Context) ([]driver.Item, error)
}

func (b *armedRead) Abilities() driver.Abilities {
	a := b.lookedUp.Abilities()
	many := a.ReadMany
	a.ReadMany = func(ctx context.Context, keys []string) ([]driver.Item, error) {
		if b.match(keys) && b.armed.CompareAndSwap(true, false) {
			return b.answer(ctx)
		}
		return many(ctx, keys)
	}
	return a
}

// hasEntry reports whether keys hold an index entry's (memstore's, under
// "\uFFFF").
func hasEntry(keys []string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "\uFFFF") })
}

// memberID carries a caller's number in its context (heldBy).
type memberID struct{}

// heldBy is an armedRead answer that reports on who the number of the
// caller making the read and holds it until that caller's context ends.
func heldBy(who chan<- int) func(ctx context.Context) ([]driver.Item, error) {
	return func(ctx context.Context) ([]driver.Item, error) {
		id, _ := ctx.Value(memberID{}).(int)
		who <- id
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

func TestTxCreateLikelyTakenKeysReadTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		p := &pointReads{lookedUp: &lookedUp{heldCommits: h}, n: map[string]int{}}
		other := etagstore.New[counter](p, nil) // another process: a cache of its own
		s := etagstore.New[counter](p, nil)
		ctx := t.Context()
		for _, k := range []string{"mine1", "mine2", "gone"} {
			if _, err := s.Create(ctx, k, counter{100}); err != nil { // in s's cache: most likely taken
				t.Fatal(err)
			}
		}
		d, err := other.Get(ctx, "gone")
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Delete(ctx, "gone", d.ETag); err != nil { // s's cache still holds it
			t.Fatal(err)
		}
		p.read("") // forget the set-up's reads
		p.mu.Lock()
		clear(p.n)
		p.mu.Unlock()

		var wg sync.WaitGroup
		holding(t, s, &wg)
		fns := []func(tx *etagstore.Tx[counter]) error{increment("x"), createWithSide("mine1"), createWithSide("mine2"), createWithSide("gone")}
		errs := make([]error, len(fns))
		for i, fn := range fns {
			wg.Go(func() { _, errs[i] = s.Transact(ctx, fn) })
			synctest.Wait()
		}
		close(h.hold)
		wg.Wait()

		if errs[0] != nil {
			t.Errorf("the member creating nothing: %v", errs[0])
		}
		wantOnly(t, "a Create of mine1, which exists", errs[1], etagstore.ErrExists)
		wantOnly(t, "a Create of mine2, which exists", errs[2], etagstore.ErrExists)
		if errs[3] != nil {
			t.Errorf("a Create of a key the cache holds but another process deleted: %v", errs[3])
		}
		for k, want := range map[string]int{"x": 1, "side/mine1": -1, "side/mine2": -1, "gone": 1, "side/gone": 1} {
			d, err := s.Get(ctx, k)
			if want < 0 && err == nil || want >= 0 && (err != nil || d.Value.N != want) {
				t.Errorf("%s = %+v, %v; want N %d (-1: missing)", k, d.Value, err, want)
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		// gone's member, finding it missing, runs on its own: that run
		// may read it once more; no probe reads a key by itself.
		for k, most := range map[string]int{"mine1": 0, "mine2": 0, "gone": 1} {
			if p.n[k] > most {
				t.Errorf("%s was read %d times on its own; want it read with the others (at most %d)", k, p.n[k], most)
			}
		}
		p.lookedUp.mu.Lock()
		defer p.lookedUp.mu.Unlock()
		together := slices.ContainsFunc(p.reads, func(keys []string) bool {
			return len(keys) == 3 && slices.Contains(keys, "mine1") && slices.Contains(keys, "mine2") && slices.Contains(keys, "gone")
		})
		if !together {
			t.Errorf("ReadMany calls %q; want one of mine1, mine2 and gone together", p.reads)
		}
	})
}
