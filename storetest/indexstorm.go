package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
)

// IndexStorm is a storm of writes of IdxCards with colliding unique
// titles: Goroutines goroutines each run Ops operations (create, rename,
// relabel, delete, upsert, Replace with ETagAny, a transaction swapping
// two titles) on Cards cards of each board, with titles from a space of
// Titles, through the Stores given in turn. Run it, then check the
// invariant with IdxCardProblems.
type IndexStorm struct {
	Goroutines int
	Ops        int
	Boards     []string
	Cards      int // per board
	Titles     int
	Seed       uint64
	// Key is the key of card in board, in the backend's format.
	Key func(board, card string) string
}

// StormTally counts the outcomes of a storm's operations, by class.
type StormTally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *StormTally) add(op string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op+" "+errClass(err)]++
}

// String lists the counts.
func (c *StormTally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for k, v := range c.n {
		lines = append(lines, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, " ")
}

func errClass(err error) string {
	var ue *etagstore.UniqueError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ue):
		return "unique"
	case errors.Is(err, etagstore.ErrOutcomeUnknown):
		return "unknown"
	case errors.Is(err, etagstore.ErrExists):
		return "exists"
	case errors.Is(err, etagstore.ErrNotFound):
		return "notfound"
	case errors.Is(err, etagstore.ErrConflict):
		return "conflict"
	case errors.Is(err, etagstore.ErrInvalidInput):
		return "INVALID"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "ctx"
	case errors.Is(err, etagstore.ErrUnavailable):
		return "unavailable"
	}
	return "other"
}

// Count is how many operations op ended in class (ok, unique, exists,
// notfound, conflict, unknown, unavailable, ctx, INVALID, other).
func (c *StormTally) Count(op, class string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op+" "+class]
}

// stormOpTime bounds one operation of a storm: far beyond what retries
// under its faults take, so that one running out of it is a write that
// makes no progress (a livelock), not a slow machine.
const stormOpTime = 30 * time.Second

// Run runs the storm through stores (all over one backend) and returns
// the tally. An operation's error of a class no fault or race explains
// (ErrInvalidInput, a *UniqueError naming its own key) fails t.
func (o IndexStorm) Run(t *testing.T, stores []*etagstore.Store[IdxCard]) *StormTally {
	t.Helper()
	ctx := t.Context()
	tally := &StormTally{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range o.Goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(o.Seed, uint64(g)))
			<-start
			for i := range o.Ops {
				s := stores[(g+i)%len(stores)]
				board := o.Boards[rng.IntN(len(o.Boards))]
				key := o.Key(board, fmt.Sprintf("c%02d", rng.IntN(o.Cards)))
				title := fmt.Sprintf("title %d/#?", rng.IntN(o.Titles))
				labels := fmt.Sprintf("l%d,l%d", rng.IntN(4), rng.IntN(4))
				opCtx, cancel := context.WithTimeout(ctx, stormOpTime)
				op, err := o.one(opCtx, rng, s, board, key, title, labels)
				cancel()
				tally.add(op, err)
				if errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s %q ran %v without an outcome: a write that makes no progress (%v)", op, key, stormOpTime, err)
				}
				var ue *etagstore.UniqueError
				if errors.As(err, &ue) && (ue.Key == ue.By || ue.Index != "title") {
					t.Errorf("%s %q: %v: a UniqueError naming its own key or another index", op, key, err)
				}
				if errors.Is(err, etagstore.ErrInvalidInput) {
					t.Errorf("%s %q: %v", op, key, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return tally
}

func (o IndexStorm) one(ctx context.Context, rng *rand.Rand, s *etagstore.Store[IdxCard], board, key, title, labels string) (string, error) {
	var err error
	switch op := rng.IntN(10); op {
	case 0, 1, 2:
		_, err = s.Create(ctx, key, IdxCard{Title: title, Labels: labels, Tag: board})
		return "create", err
	case 3, 4:
		_, err = s.Update(ctx, key, func(c *IdxCard) error { c.Title = title; c.N++; return nil })
		return "rename", err
	case 5:
		_, err = s.Update(ctx, key, func(c *IdxCard) error { c.Labels = labels; c.N++; return nil })
		return "relabel", err
	case 6:
		d, gerr := s.Get(ctx, key)
		if gerr != nil {
			return "delete", gerr
		}
		return "delete", s.Delete(ctx, key, d.ETag)
	case 7:
		if rng.IntN(2) == 0 {
			return "delete-any", s.Delete(ctx, key, etagstore.ETagAny)
		}
		_, err = s.Replace(ctx, etagstore.Doc[IdxCard]{Key: key, ETag: etagstore.ETagAny, Value: IdxCard{Title: title, Labels: labels}})
		return "replace-any", err
	case 8:
		_, err = s.Upsert(ctx, key, IdxCard{Title: title, Labels: labels})
		return "upsert", err
	default:
		other := o.Key(board, fmt.Sprintf("c%02d", rng.IntN(o.Cards)))
		if other == key {
			return "swap-same", nil
		}
		_, err = s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error {
			a, err := tx.Get(key)
			if err != nil {
				return err
			}
			b, err := tx.Get(other)
			if err != nil {
				return err
			}
			a.Title, b.Title = b.Title, a.Title
			if err := tx.Put(key, a); err != nil {
				return err
			}
			return tx.Put(other, b)
		})
		return "swap", err
	}
}

// StormStoreOptions are the options of the Stores a storm writes through:
// group commit on and off, no cache, a short retry policy.
func StormStoreOptions() []*etagstore.Options {
	return []*etagstore.Options{
		{},
		{DisableGroupCommit: true},
		{CacheSize: -1},
		{Retry: &etagstore.RetryPolicy{MaxAttempts: 3, InitialInterval: 1, MaxInterval: 1}},
	}
}
