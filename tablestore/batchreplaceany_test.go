package tablestore_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// TestBatchReplaceAnyOfRead: a batch's Replace with ETagAny of a Doc a
// read returned is refused before anything is sent (blind, it would put
// back what others changed since the read); fenced, the batch reads first
// and writes the Doc's change onto the version read, keeping the other
// writer's changes; a Doc built by hand writes T alone.
func TestBatchReplaceAnyOfRead(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	s := tablestore.NewStore[formDoc](client, &tablestore.Options{Partition: "p"}, nil)
	wide := tablestore.NewStore[formWide](client, &tablestore.Options{Partition: "p"}, nil)
	start := formWide{Title: "a", N: 1, X: "x"}
	for _, key := range []string{"blind", "fenced", "hand"} {
		if _, err := wide.Create(ctx, key, start); err != nil {
			t.Fatal(err)
		}
	}
	read := func(key string) etagstore.Doc[formDoc] {
		d, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wide.Update(ctx, key, func(w *formWide) error { w.Title, w.X = "a2", "x2"; return nil }); err != nil {
			t.Fatal(err)
		}
		d.ETag, d.Value.N = etagstore.ETagAny, 9
		return d
	}

	_, err := tablestore.NewBatch(s).Replace(read("blind")).Submit(ctx)
	var be *tablestore.BatchError
	if !errors.Is(err, etagstore.ErrInvalidInput) || !errors.As(err, &be) || be.Index != 0 {
		t.Errorf("unfenced batch Replace with ETagAny of a read Doc = %v, want ErrInvalidInput naming action 0", err)
	}
	want := formWide{Title: "a2", N: 1, X: "x2"}
	if got, err := wide.Get(ctx, "blind"); err != nil || !cmp.Equal(want, got.Value) {
		t.Errorf("after the refused batch: %+v, %v; want %+v", got.Value, err, want)
	}

	if _, err := tablestore.NewBatch(s).Replace(read("fenced")).Submit(etagstore.WithFence(ctx, 1)); err != nil {
		t.Fatalf("fenced batch Replace with ETagAny: %v", err)
	}
	want = formWide{Title: "a2", N: 9, X: "x2"}
	if got, err := wide.Get(ctx, "fenced"); err != nil || !cmp.Equal(want, got.Value) {
		t.Errorf("after the fenced batch: %+v, %v; want %+v (the other writer's Title and X kept)", got.Value, err, want)
	}

	hand := etagstore.Doc[formDoc]{Key: "hand", ETag: etagstore.ETagAny, Value: formDoc{Title: "h", N: 3}}
	if _, err := tablestore.NewBatch(s).Replace(hand).Submit(ctx); err != nil {
		t.Fatalf("batch Replace with ETagAny of a Doc built by hand: %v", err)
	}
	want = formWide{Title: "h", N: 3}
	if got, err := wide.Get(ctx, "hand"); err != nil || !cmp.Equal(want, got.Value) {
		t.Errorf("after a batch Replace of a Doc built by hand: %+v, %v; want %+v (T alone)", got.Value, err, want)
	}
}
