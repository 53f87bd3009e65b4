package tablestore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/etagstore/etagstore"
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
