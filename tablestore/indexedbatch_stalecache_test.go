package tablestore_test

import (
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/tablestore"
)

// TestIndexedBatchStaleCache: a Batch on an indexed Store starts from the
// versions its version cache holds (it reads none of them); when another
// process has replaced them since, the commit, conditioned on the cached
// versions, is refused, and the batch is built again over the versions it
// then reads: it ends with exactly the entries the stored documents imply.
// A Replace whose ETag is the stale one (as the cache's copy) fails with a
// *ConflictError naming the action, and nothing is written.
func TestIndexedBatchStaleCache(t *testing.T) {
	ctx := t.Context()
	client, sent := newCountedTable(t)
	s := etagstore.New(tablestore.New(client, nil), nil, indexedTitle)
	other := etagstore.New(tablestore.New(client, nil), nil, indexedTitle) // another process
	var docs []etagstore.Doc[indexed]
	for _, k := range []string{"a", "b", "c"} {
		d, err := s.Create(ctx, "b1/"+k, indexed{Title: k + "0"})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	for _, d := range docs[:2] { // s's cache still holds a0 and b0
		d.Value.Title = d.Key[3:] + "1"
		if _, err := other.Replace(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	c := docs[2]
	c.Value.Title = "c2"
	before := sent.n.Load()
	etags, err := tablestore.NewBatch(s).
		Upsert("b1/a", indexed{Title: "a2"}).
		Delete("b1/b", etagstore.ETagAny).
		Replace(c).
		Create("b1/d", indexed{Title: "d2"}).
		Submit(ctx)
	if err != nil {
		t.Fatalf("Submit over stale cached versions: %v", err)
	}
	t.Logf("the batch over two stale cached versions sent %d requests", sent.n.Load()-before)
	checkHolders(t, s, map[string]string{
		"b1/a0": "", "b1/a1": "", "b1/a2": "b1/a",
		"b1/b0": "", "b1/b1": "",
		"b1/c0": "", "b1/c2": "b1/c",
		"b1/d2": "b1/d",
	})
	if a, err := other.Get(ctx, "b1/a"); err != nil || a.Value.Title != "a2" {
		t.Errorf("b1/a = %+v, %v; want a2", a.Value, err)
	}
	if _, err := other.Get(ctx, "b1/b"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("b1/b: %v, want ErrNotFound", err)
	}

	// c changes behind s's cache; a Replace on the ETag s holds is stale.
	cur, err := other.Get(ctx, "b1/c")
	if err != nil {
		t.Fatal(err)
	}
	cur.Value.Title = "c3"
	if _, err := other.Replace(ctx, cur); err != nil {
		t.Fatal(err)
	}
	mine, err := s.Get(ctx, "b1/a") // a version s holds, not stale
	if err != nil {
		t.Fatal(err)
	}
	mine.Value.Title = "a4"
	stale := etagstore.Doc[indexed]{Key: "b1/c", Value: indexed{Title: "c4"}, ETag: etags[2]} // the version s's cache holds
	_, err = tablestore.NewBatch(s).Replace(mine).Replace(stale).Create("b1/e", indexed{Title: "e4"}).Submit(ctx)
	var be *tablestore.BatchError
	var ce *etagstore.ConflictError[indexed]
	if !errors.As(err, &be) || be.Index != 1 || !errors.As(err, &ce) || ce.Theirs.Value.Title != "c3" {
		t.Fatalf("Submit with a stale ETag = %v; want a *ConflictError holding c3, naming action 1", err)
	}
	checkHolders(t, s, map[string]string{"b1/a2": "b1/a", "b1/a4": "", "b1/c3": "b1/c", "b1/c4": "", "b1/e4": ""})
	if _, err := other.Get(ctx, "b1/e"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("b1/e after the refused batch: %v, want ErrNotFound", err)
	}
}
