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

// A transaction is one entity group transaction: documents of one
// partition, at most 100 of them; anything else is refused before anything
// is sent.
func TestTransactLimits(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	if _, err := s.Create(ctx, "p/a", Task{Title: "a"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
		return errors.Join(tx.Put("p/a", Task{Title: "a2"}), tx.Put("q/b", Task{Title: "b"}))
	})
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("two partitions: Transact = %v, want ErrInvalidInput", err)
	}
	_, err = s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
		for i := range 101 {
			if err := tx.Put(fmt.Sprintf("p/n%03d", i), Task{N: int64(i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("101 documents: Transact = %v, want ErrInvalidInput", err)
	}
	for d, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		if d.Key != "p/a" || d.Value.Title != "a" {
			t.Errorf("after refused transactions: %s = %+v, want only p/a unchanged", d.Key, d.Value)
		}
	}
	docs, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
		for i := range 100 {
			if err := tx.Put(fmt.Sprintf("p/n%03d", i), Task{N: int64(i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || len(docs) != 100 {
		t.Fatalf("100 documents: %d docs, %v", len(docs), err)
	}
	got, err := s.Get(ctx, "p/n099")
	if err != nil || got.ETag != docs[99].ETag {
		t.Errorf("p/n099 = %+v, %v; Transact said ETag %q", got, err, docs[99].ETag)
	}
}

// A batch Replace of a Doc read by an older type keeps the properties a
// newer type wrote; a batch Merge leaves them alone anyway.
func TestBatchKeepsPropertiesTheStoreDoesNotKnow(t *testing.T) {
	ctx := t.Context()
	b := tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})
	newer := etagstore.New[storetest.Newer](b, nil)
	older := etagstore.New[storetest.Older](b, nil)
	want := storetest.Newer{Title: "v2", I8: -8, U64: 1<<63 + 1, F32: 1.5, Bytes: []byte{1, 2}, ID: "6f9619ff-8b86-d011-b42d-00c04fc964ff", List: []string{"a"}}
	for _, k := range []string{"r", "m"} {
		if _, err := newer.Create(ctx, k, want); err != nil {
			t.Fatal(err)
		}
	}
	r, err := older.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := older.Get(ctx, "m")
	r.Value.N, m.Value.N = 1, 1
	if _, err := tablestore.NewBatch(older).Replace(r).Merge(m, "N").Submit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"r", "m"} {
		got, err := newer.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		want.N = 1
		if diff := cmp.Diff(want, got.Value); diff != "" {
			t.Errorf("%s after the older type's batch (-want +got):\n%s", k, diff)
		}
	}
}

// Two repositories an app builds over one table client, each with its own
// tablestore Backend and document type, share a transaction when their
// partition rules agree (driver.Abilities.CommitScope); a Backend of
// another partition is refused at its first use, with nothing written.
func TestTransactAcrossBackendsOfOneTable(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	type Board struct{ Count int }
	tasks := tablestore.NewStore[Task](client, &tablestore.Options{Partition: "p"}, nil)
	boards := tablestore.NewStore[Board](client, &tablestore.Options{Partition: "p"}, nil)
	elsewhere := tablestore.NewStore[Board](client, &tablestore.Options{Partition: "q"}, nil)
	if _, err := boards.Create(ctx, "board", Board{}); err != nil {
		t.Fatal(err)
	}
	var txn *etagstore.Txn
	if err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		txn = tx
		b, err := boards.In(tx).Get("board")
		if err != nil {
			return err
		}
		b.Count++
		return errors.Join(tasks.In(tx).Put("t1", Task{Title: "one"}), boards.In(tx).Put("board", b))
	}); err != nil {
		t.Fatal(err)
	}
	b, err := boards.Get(ctx, "board")
	if err != nil || b.Value.Count != 1 {
		t.Fatalf("board after the transaction: %+v, %v", b, err)
	}
	if etag, err := boards.In(txn).ETag("board"); err != nil || etag != b.ETag {
		t.Errorf("In(tx).ETag after the commit = %q, %v; Get has %q", etag, err, b.ETag)
	}
	err = etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		if err := tasks.In(tx).Put("t2", Task{Title: "two"}); err != nil {
			return err
		}
		return elsewhere.In(tx).Put("board", Board{Count: 9})
	})
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("another partition's Backend: Transact = %v, want ErrInvalidInput", err)
	}
	if _, err := tasks.Get(ctx, "t2"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("t2 after the refused transaction: %v, want nothing written", err)
	}
}
