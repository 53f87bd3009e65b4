package tablestore_test

import (
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/tablestore"
)

// TestIndexedBatchTakesAHeldValue: a Batch on an indexed Store reads no
// entry before it sends (it predicts the values it takes are free) unless
// its Store wrote the value's entry lately; either way a value another
// document holds fails the batch with a *UniqueError naming the holder
// and the taker, and nothing of the batch is written.
func TestIndexedBatchTakesAHeldValue(t *testing.T) {
	for _, by := range []string{"its own Store", "another process"} {
		t.Run(by, func(t *testing.T) {
			ctx := t.Context()
			client, _ := newCountedTable(t)
			s := etagstore.New(tablestore.New(client, nil), nil, indexedTitle)
			holderStore := s
			if by == "another process" {
				holderStore = etagstore.New(tablestore.New(client, nil), nil, indexedTitle)
			}
			if _, err := holderStore.Create(ctx, "b1/x", indexed{Title: "taken"}); err != nil {
				t.Fatal(err)
			}
			_, err := tablestore.NewBatch(s).
				Create("b1/y", indexed{Title: "free"}).
				Create("b1/z", indexed{Title: "Taken"}).
				Submit(ctx)
			var ue *etagstore.UniqueError
			if !errors.Is(err, etagstore.ErrExists) || !errors.As(err, &ue) || ue.Key != "b1/x" || ue.By != "b1/z" {
				t.Fatalf("Submit = %v; want a *UniqueError: b1/x holds the value, b1/z cannot take it", err)
			}
			checkHolders(t, s, map[string]string{"b1/taken": "b1/x", "b1/free": ""})
			for _, k := range []string{"b1/y", "b1/z"} {
				if _, err := s.Get(ctx, k); !errors.Is(err, etagstore.ErrNotFound) {
					t.Errorf("%s after the refused batch: %v, want ErrNotFound", k, err)
				}
			}
		})
	}
}
