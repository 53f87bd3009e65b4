package tablestore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/etagstore/etagstore"
)

// Batches of transactions on tables at their limits: one partition and
// 100 entities per entity group transaction.

// Keys "PK/RK" (no Options.Partition): members in several partitions in
// one queue; each commits, the one across partitions is refused.
func TestTxBatchTablesPartitionsBatch(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "")
	s := etagstore.New[Task](h, nil)
	var members []func()
	for _, k := range []string{"p1/a", "p2/b", "p1/c", "p3/d", "p2/e"} {
		members = append(members, func() {
			if docs, err := s.Transact(ctx, incTask(k)); err != nil || len(docs) != 1 {
				t.Errorf("%s: %v %v", k, docs, err)
			}
		})
	}
	members = append(members, func() {
		if docs, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
			return errors.Join(incTask("p1/a")(tx), incTask("p1/c")(tx))
		}); err != nil || len(docs) != 2 {
			t.Errorf("p1 pair: %v %v", docs, err)
		}
	}, func() {
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
			return errors.Join(tx.Put("p1/x", Task{N: 1}), tx.Put("p2/x", Task{N: 1}))
		})
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("across partitions: %v, want ErrInvalidInput", err)
		}
	})
	inOneBatch(t, h, holdTask(t, s, "h/hold"), members...)
	for k, want := range map[string]int64{"p1/a": 2, "p1/c": 2, "p2/b": 1, "p3/d": 1, "p2/e": 1} {
		if d, err := s.Get(ctx, k); err != nil || d.Value.N != want {
			t.Errorf("%s = %+v %v, want N=%d", k, d.Value, err, want)
		}
	}
	for _, k := range []string{"p1/x", "p2/x"} {
		if _, err := s.Get(ctx, k); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("%s: %v, want not found", k, err)
		}
	}
	t.Logf("commits: %d", h.commits.Load())
}

// More than 100 entities across members: each commits; the batch splits.
func TestTxBatchTablesOver100(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	s := etagstore.New[Task](h, nil)
	var members []func()
	for m := range 3 {
		members = append(members, func() {
			docs, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
				for k := range 40 {
					if err := incTask(fmt.Sprintf("m%d-%02d", m, k))(tx); err != nil {
						return err
					}
				}
				return incTask("shared")(tx)
			})
			if err != nil || len(docs) != 41 {
				t.Errorf("member %d: %d docs, %v", m, len(docs), err)
			}
		})
	}
	inOneBatch(t, h, holdTask(t, s, "hold"), members...)
	if d, err := s.Get(ctx, "shared"); err != nil || d.Value.N != 3 {
		t.Errorf("shared = %+v %v", d.Value, err)
	}
	n := 0
	for d, err := range s.List(ctx, "m") {
		if err != nil || d.Value.N != 1 {
			t.Errorf("%s = %+v %v", d.Key, d.Value, err)
		}
		n++
	}
	if n != 120 {
		t.Errorf("%d member keys, want 120", n)
	}
	t.Logf("commits: %d", h.commits.Load())
}
