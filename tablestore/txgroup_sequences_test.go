package tablestore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Batches of transactions on tables: writes of one entity in sequence
// (bumps, delete then create, Upsert then Put) store what they store serially.

// One batch of the older type's writes on tables: bumps of one document
// (Merge of changes), a delete then a create of another (T alone, anew),
// an upsert then a Put of a third (T alone).
func TestTxBatchTablesBatchRewrites(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	newer := etagstore.New[storetest.Newer](h, nil)
	older := etagstore.New[storetest.Older](h, nil)
	full := func(title string) storetest.Newer {
		n := storetest.Newer{Title: title, N: 0, I8: -8, U64: 1<<63 + 5, F32: 1.5, Bytes: []byte{0, 1}, ID: "6f9619ff-8b86-d011-b42d-00c04fc964ff", List: []string{"a"}}
		n.Addr.City, n.Addr.Zip = "Lyon", "69001"
		n.Items = append(n.Items, struct {
			Name string
			Qty  int
		}{"pen", 3})
		return n
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := newer.Create(ctx, k, full(k)); err != nil {
			t.Fatal(err)
		}
	}
	bump := func(tx *etagstore.Tx[storetest.Older]) error {
		o, err := tx.Get("k1")
		if err != nil {
			return err
		}
		o.N++
		o.Addr.City += "+"
		o.Items[0].Name += "+"
		return tx.Put("k1", o)
	}
	docs := make([][]etagstore.Doc[storetest.Older], 6)
	errs := make([]error, 6)
	fns := []func(tx *etagstore.Tx[storetest.Older]) error{
		bump, bump,
		func(tx *etagstore.Tx[storetest.Older]) error { return tx.Delete("k2") },
		func(tx *etagstore.Tx[storetest.Older]) error { return tx.Put("k2", storetest.Older{Title: "new"}) },
		func(tx *etagstore.Tx[storetest.Older]) error { return tx.Upsert("k3", storetest.Older{Title: "u"}) },
		func(tx *etagstore.Tx[storetest.Older]) error {
			o, err := tx.Get("k3")
			if err != nil {
				return err
			}
			o.N = 7
			return tx.Put("k3", o)
		},
	}
	var members []func()
	for i, fn := range fns {
		members = append(members, func() { docs[i], errs[i] = older.Transact(ctx, fn) })
	}
	inOneBatch(t, h, func() {
		if _, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error {
			return tx.Upsert("hold", storetest.Older{})
		}); err != nil {
			t.Errorf("hold: %v", err)
		}
	}, members...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
	}
	want1 := full("k1")
	want1.N, want1.Addr.City, want1.Items[0].Name = 2, "Lyon++", "pen++"
	for k, want := range map[string]storetest.Newer{"k1": want1, "k2": {Title: "new"}, "k3": {Title: "u", N: 7}} {
		got, err := newer.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got.Value); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
		for i, ds := range docs {
			for _, d := range ds {
				if d.Key == k {
					t.Logf("member %d: %s ETag %s (stored %s)", i, k, d.ETag, got.ETag)
				}
			}
		}
	}
	if d, _ := newer.Get(ctx, "k1"); len(docs[1]) != 1 || docs[1][0].ETag != d.ETag {
		t.Errorf("the last bump's doc: %+v, stored ETag %s", docs[1], d.ETag)
	}
	t.Logf("commits: %d", h.commits.Load())
}

// A transaction on its own: Delete, Put, Delete of a stored key;
// Put, Delete, Put of a key created in it; Delete then Put (T alone).
func TestTxBatchTablesSoloRewrites(t *testing.T) {
	ctx := t.Context()
	b := tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})
	newer := etagstore.New[storetest.Newer](b, nil)
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			older := etagstore.New[storetest.Older](b, &etagstore.Options{DisableGroupCommit: !grouped})
			pre := fmt.Sprint(grouped)
			a, bb, c := pre+"a", pre+"b", pre+"c"
			for _, k := range []string{a, c} {
				n := storetest.Newer{Title: k, I8: 3}
				n.Addr.Zip = "z"
				if _, err := newer.Create(ctx, k, n); err != nil {
					t.Fatal(err)
				}
			}
			docs, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error {
				return errors.Join(tx.Delete(a), tx.Put(a, storetest.Older{Title: "x"}), tx.Delete(a))
			})
			if err != nil || len(docs) != 0 {
				t.Errorf("delete, put, delete: %v %v", docs, err)
			}
			if _, err := newer.Get(ctx, a); !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("%s after delete, put, delete: %v, want not found", a, err)
			}
			docs, err = older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error {
				return errors.Join(tx.Put(bb, storetest.Older{Title: "1"}), tx.Delete(bb), tx.Put(bb, storetest.Older{Title: "2"}))
			})
			got, gerr := newer.Get(ctx, bb)
			if err != nil || len(docs) != 1 || gerr != nil || got.Value.Title != "2" || docs[0].ETag != got.ETag {
				t.Errorf("put, delete, put: %v %v; stored %+v %v", docs, err, got, gerr)
			}
			runs := 0
			other := etagstore.New[storetest.Newer](b, &etagstore.Options{DisableGroupCommit: true})
			docs, err = older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error {
				runs++
				if err := tx.Delete(c); err != nil {
					return err
				}
				if runs == 1 { // the stored version moves on: the If-Match of the create again fails
					if _, err := other.Update(ctx, c, func(n *storetest.Newer) error { n.I8++; return nil }); err != nil {
						return err
					}
				}
				return tx.Put(c, storetest.Older{Title: "c2"})
			})
			got, gerr = newer.Get(ctx, c)
			if err != nil || len(docs) != 1 || gerr != nil || docs[0].ETag != got.ETag || runs != 2 {
				t.Errorf("delete then put: %v %v, %d runs; stored %+v %v", docs, err, runs, got, gerr)
			}
			if diff := cmp.Diff(storetest.Newer{Title: "c2"}, got.Value); diff != "" {
				t.Errorf("delete then put: T alone (-want +got):\n%s", diff)
			}
		})
	}
}

// Behind a member that read k, a blind Upsert of k (T alone on its own,
// and after that member serially) keeps the newer type's properties.
func TestTxBatchTablesUpsertBehindRead(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	newer := etagstore.New[storetest.Newer](h, nil)
	older := etagstore.New[storetest.Older](h, nil)
	n := storetest.Newer{Title: "k", I8: -8}
	n.Addr.Zip = "69001"
	if _, err := newer.Create(ctx, "k", n); err != nil {
		t.Fatal(err)
	}
	inOneBatch(t, h, func() {
		if _, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error { return tx.Upsert("hold", storetest.Older{}) }); err != nil {
			t.Errorf("hold: %v", err)
		}
	}, func() {
		if _, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error { _, err := tx.Get("k"); return err }); err != nil {
			t.Errorf("reader: %v", err)
		}
	}, func() {
		if _, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error { return tx.Upsert("k", storetest.Older{Title: "u"}) }); err != nil {
			t.Errorf("upsert: %v", err)
		}
	})
	got, err := newer.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(storetest.Newer{Title: "u"}, got.Value); diff != "" {
		t.Errorf("a blind Upsert behind a reader: T alone (-want +got):\n%s", diff)
	}
}
