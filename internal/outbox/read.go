package outbox

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/etagstore/etagstore/driver"
)

// This file reads a partition's events back, as the root's Outbox.Read
// yields them.

// CheckPartition refuses partition when it is not a commit scope of the
// backend, as a key prefix (see the root's Event.Partition).
func (l Layout) CheckPartition(partition string) error {
	if scope, err := l.Space.Scope(partition + "k"); err != nil || scope != partition {
		return driver.Errorf(driver.ErrInvalidInput, "Read: %q is not a partition of this backend (a key prefix such as \"pk/\" on tables, \"\" on memstore)", partition)
	}
	return nil
}

// Read is partition's events after Seq after and up to head (the Seq
// its head held when read, before the listing), in order, listed from b
// and decoded by event; an event expired says is past its retention is
// left out.
func Read[V any](ctx context.Context, l Layout, b driver.Backend, partition string, after, head int64, event func(driver.Item) (V, error), expired func(error) bool) ([]V, error) {
	type found struct {
		seq int64
		ev  V
	}
	var out []found
	seen := map[int64]bool{}
	// Pending first, then sent: an event relayed meanwhile moves from the
	// one to the other, and is met in one of them.
	for _, prefix := range []string{l.PendingPrefix(partition), l.SentPrefix(partition)} {
		start := prefix + fmt.Sprintf("%0*d", SeqDigits, after)
		for it, err := range listFrom(ctx, b, prefix, start) {
			if err != nil {
				return nil, err
			}
			seq, ok := l.Seq(it.Key)
			if !ok || seq <= after || seen[seq] {
				continue
			}
			if seq > head {
				break
			}
			ev, err := event(it)
			switch {
			case expired(err):
				continue // past its retention
			case err != nil:
				return nil, err
			}
			seen[seq] = true
			out = append(out, found{seq, ev})
		}
	}
	slices.SortFunc(out, func(a, b found) int { return int(a.seq - b.seq) })
	evs := make([]V, len(out))
	for i, f := range out {
		evs[i] = f.ev
	}
	return evs, nil
}

// listFrom yields the records under prefix after the key after, a page
// of b's at a time.
func listFrom(ctx context.Context, b driver.Backend, prefix, after string) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		for {
			items, more, err := b.ListPage(ctx, prefix, after, 1000)
			if err != nil {
				yield(driver.Item{}, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if !more || len(items) == 0 {
				return
			}
			after = items[len(items)-1].Key
		}
	}
}
