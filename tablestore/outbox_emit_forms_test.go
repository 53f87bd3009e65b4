package tablestore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Adversarial: forms of Emit on tables (a commit scope per partition),
// and Read's arguments.

type advOrder struct{ N int }

type advEvent struct {
	Key string
	N   int
}

func readAll(t *testing.T, ob *etagstore.Outbox[advEvent], partition string, after int64) ([]etagstore.Event[advEvent], error) {
	t.Helper()
	var out []etagstore.Event[advEvent]
	for e, err := range ob.Read(t.Context(), partition, after) {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Emit twice in one fn: consecutive Seqs, both committed with the
// document; Read with a negative after yields them all; Read of ""
// (no partition on a table without Options.Partition) is ErrInvalidInput.
func TestOutboxEmitTwiceAndReadArgs(t *testing.T) {
	ctx := t.Context()
	b := tablestore.New(azuritetest.NewTable(t), nil)
	docs := etagstore.New[advOrder](b, nil)
	ob := etagstore.NewOutbox[advEvent](b, nil)
	for i := range 2 {
		err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			key := fmt.Sprintf("eu/o%d", i)
			if err := docs.In(tx).Put(key, advOrder{i}); err != nil {
				return err
			}
			if err := ob.In(tx).Emit(advEvent{key, 1}); err != nil {
				return err
			}
			return ob.In(tx).Emit(advEvent{key, 2})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, after := range []int64{-5, 0} {
		evs, err := readAll(t, ob, "eu/", after)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 4 {
			t.Fatalf("Read(eu/, %d) = %d events, want 4", after, len(evs))
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) || e.Value.Key != fmt.Sprintf("eu/o%d", i/2) || e.Value.N != i%2+1 || e.Partition != "eu/" {
				t.Errorf("Read(eu/, %d)[%d] = %+v", after, i, e)
			}
		}
	}
	evs, err := readAll(t, ob, "eu/", 3)
	if err != nil || len(evs) != 1 || evs[0].Seq != 4 {
		t.Errorf("Read(eu/, 3) = %+v, %v; want Seq 4 alone", evs, err)
	}
	_, err = readAll(t, ob, "", 0)
	if !errors.Is(err, etagstore.ErrInvalidInput) || strings.ContainsAny(err.Error(), "\r\n") {
		t.Errorf("Read(\"\") on a partitioned table = %v, want ErrInvalidInput in one line", err)
	}
	_, err = readAll(t, ob, "eu", 0)
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("Read(\"eu\") = %v, want ErrInvalidInput", err)
	}
}

// Concurrent transactions (group commit) in several partitions, each
// creating a document and emitting one event: every partition's events
// are 1..n without a gap or a repeat, one per document of that
// partition, and relayed in order per partition, once each.
func TestOutboxEmitGroupCommitPartitions(t *testing.T) {
	ctx := t.Context()
	b := tablestore.New(azuritetest.NewTable(t), nil)
	docs := etagstore.New[advOrder](b, nil)
	ob := etagstore.NewOutbox[advEvent](b, nil)
	const parts, per = 3, 8
	var wg sync.WaitGroup
	errs := make(chan error, parts*per)
	gate := make(chan struct{})
	for p := range parts {
		for i := range per {
			wg.Go(func() {
				<-gate
				key := fmt.Sprintf("p%d/o%d", p, i)
				errs <- etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
					if err := docs.In(tx).Create(key, advOrder{i}); err != nil {
						return err
					}
					return ob.In(tx).Emit(advEvent{Key: key})
				})
			})
		}
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for p := range parts {
		part := fmt.Sprintf("p%d/", p)
		evs, err := readAll(t, ob, part, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i, e := range evs {
			if e.Seq != int64(i+1) || !strings.HasPrefix(e.Value.Key, part) || seen[e.Value.Key] {
				t.Errorf("%s event %d = %+v", part, i, e)
			}
			seen[e.Value.Key] = true
		}
		if len(evs) != per {
			t.Errorf("%s has %d events, want %d", part, len(evs), per)
		}
	}
	var mu sync.Mutex
	last := map[string]int64{}
	n, err := ob.RelayOnce(ctx, func(_ context.Context, e etagstore.Event[advEvent]) error {
		mu.Lock()
		defer mu.Unlock()
		if e.Seq != last[e.Partition]+1 {
			t.Errorf("relayed %s Seq %d after %d", e.Partition, e.Seq, last[e.Partition])
		}
		last[e.Partition] = e.Seq
		return nil
	})
	if err != nil || n != parts*per {
		t.Errorf("RelayOnce = %d, %v; want %d", n, err, parts*per)
	}
}

// Two outboxes of different names on one table, both emitting in one
// transaction: each relays its own events alone, and a second pass
// relays nothing.
func TestOutboxTwoNamesOneTable(t *testing.T) {
	ctx := t.Context()
	b := tablestore.New(azuritetest.NewTable(t), nil)
	docs := etagstore.New[advOrder](b, nil)
	a := etagstore.NewOutbox[advEvent](b, &etagstore.OutboxOptions{Name: "a"})
	ab := etagstore.NewOutbox[advEvent](b, &etagstore.OutboxOptions{Name: "a-b"})
	for i := range 3 {
		err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			if err := docs.In(tx).Put(fmt.Sprintf("eu/o%d", i), advOrder{i}); err != nil {
				return err
			}
			if err := a.In(tx).Emit(advEvent{"a", i}); err != nil {
				return err
			}
			if i == 1 {
				return nil
			}
			return ab.In(tx).Emit(advEvent{"a-b", i})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range map[string]struct {
		ob   *etagstore.Outbox[advEvent]
		want int
	}{"a": {a, 3}, "a-b": {ab, 2}} {
		for pass := range 2 {
			n, err := c.ob.RelayOnce(ctx, func(_ context.Context, e etagstore.Event[advEvent]) error {
				if e.Value.Key != name {
					t.Errorf("outbox %s relayed %+v", name, e)
				}
				return nil
			})
			want := c.want
			if pass == 1 {
				want = 0
			}
			if err != nil || n != want {
				t.Errorf("outbox %s pass %d: RelayOnce = %d, %v; want %d", name, pass, n, err, want)
			}
		}
	}
}
