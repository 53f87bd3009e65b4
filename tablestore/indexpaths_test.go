package tablestore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// indexed is a document with a unique title.
type indexed struct {
	Title string
	N     int
}

var indexedTitle = etagstore.Unique("title", func(v indexed) string { return strings.ToLower(v.Title) })

// TestIndexedWritePaths: every write path of tablestore's own, on a Store
// with an index, either keeps the index's entries with the document or is
// refused before sending with errors.ErrUnsupported, writing nothing; it
// never writes without them. The log says which each path does (see
// docs/indexes.md): Merge reads first and writes the whole entity onto the
// version read, so it keeps them; a Batch on an indexed Store conditions
// each action on the version it replaces (known, or read first, as a
// fenced one reads), so its Create, Replace, Upsert and Delete keep them;
// UpsertMerge, Batch.Merge and Batch.UpsertMerge send properties alone
// and are refused.
func TestIndexedWritePaths(t *testing.T) {
	ctx := context.Background()
	s := etagstore.New(tablestore.New(azuritetest.NewTable(t), nil), nil, indexedTitle)
	holder := func(value string) string {
		t.Helper()
		h, err := s.GetBy(ctx, indexedTitle, value)
		if errors.Is(err, etagstore.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatalf("GetBy %q: %v", value, err)
		}
		return h.Key
	}
	paths := []struct {
		name    string
		missing bool // the write is of a key that does not exist yet
		delete  bool
		write   func(cur etagstore.Doc[indexed], title string) error
	}{
		{"Merge", false, false, func(cur etagstore.Doc[indexed], title string) error {
			cur.Value.Title = title
			_, err := tablestore.Merge(ctx, s, cur, "Title")
			return err
		}},
		{"UpsertMerge", false, false, func(cur etagstore.Doc[indexed], title string) error {
			_, err := tablestore.UpsertMerge(ctx, s, cur.Key, indexed{Title: title}, "Title")
			return err
		}},
		{"UpsertMerge/missing", true, false, func(cur etagstore.Doc[indexed], title string) error {
			_, err := tablestore.UpsertMerge(ctx, s, cur.Key, indexed{Title: title})
			return err
		}},
		{"Batch.Merge", false, false, func(cur etagstore.Doc[indexed], title string) error {
			cur.Value.Title = title
			_, err := tablestore.NewBatch(s).Merge(cur, "Title").Submit(ctx)
			return err
		}},
		{"Batch.UpsertMerge", false, false, func(cur etagstore.Doc[indexed], title string) error {
			_, err := tablestore.NewBatch(s).UpsertMerge(cur.Key, indexed{Title: title}).Submit(ctx)
			return err
		}},
		{"Batch.Create", true, false, func(cur etagstore.Doc[indexed], title string) error {
			_, err := tablestore.NewBatch(s).Create(cur.Key, indexed{Title: title}).Submit(ctx)
			return err
		}},
		{"Batch.Replace", false, false, func(cur etagstore.Doc[indexed], title string) error {
			cur.Value.Title = title
			_, err := tablestore.NewBatch(s).Replace(cur).Submit(ctx)
			return err
		}},
		{"Batch.Upsert", false, false, func(cur etagstore.Doc[indexed], title string) error {
			_, err := tablestore.NewBatch(s).Upsert(cur.Key, indexed{Title: title}).Submit(ctx)
			return err
		}},
		{"Batch.Delete", false, true, func(cur etagstore.Doc[indexed], _ string) error {
			_, err := tablestore.NewBatch(s).Delete(cur.Key, cur.ETag).Submit(ctx)
			return err
		}},
		{"fenced Batch.Replace", false, false, func(cur etagstore.Doc[indexed], title string) error {
			cur.Value.Title = title
			_, err := tablestore.NewBatch(s).Replace(cur).Submit(etagstore.WithFence(ctx, 1))
			return err
		}},
		{"fenced Batch.Delete", false, true, func(cur etagstore.Doc[indexed], _ string) error {
			_, err := tablestore.NewBatch(s).Delete(cur.Key, cur.ETag).Submit(etagstore.WithFence(ctx, 1))
			return err
		}},
	}
	refused := map[string]bool{"UpsertMerge": true, "UpsertMerge/missing": true, "Batch.Merge": true, "Batch.UpsertMerge": true}
	for i, p := range paths {
		key := "b1/c" + strconv.Itoa(i)
		was, now := "was "+strconv.Itoa(i), "now "+strconv.Itoa(i)
		cur := etagstore.Doc[indexed]{Key: key}
		if !p.missing {
			var err error
			if cur, err = s.Create(ctx, key, indexed{Title: was}); err != nil {
				t.Fatal(err)
			}
		}
		err := p.write(cur, now)
		stored, gerr := s.Get(ctx, key)
		switch {
		case errors.Is(err, errors.ErrUnsupported) != refused[p.name]:
			t.Errorf("%s: %v; want it refused: %v", p.name, err, refused[p.name])
		case errors.Is(err, errors.ErrUnsupported):
			t.Logf("%s: refused: %v", p.name, err)
			if p.missing && !errors.Is(gerr, etagstore.ErrNotFound) || !p.missing && stored.ETag != cur.ETag {
				t.Errorf("%s: refused, but %q is %+v %v", p.name, key, stored, gerr)
			}
			if holder("b1/"+now) != "" || !p.missing && holder("b1/"+was) != key {
				t.Errorf("%s: refused, but its entries changed", p.name)
			}
		case err != nil:
			t.Errorf("%s: %v, want success or errors.ErrUnsupported", p.name, err)
		case p.delete:
			t.Logf("%s: keeps the entries", p.name)
			if !errors.Is(gerr, etagstore.ErrNotFound) || holder("b1/"+was) != "" {
				t.Errorf("%s: %q is %+v %v, and %q is held by %q", p.name, key, stored, gerr, was, holder("b1/"+was))
			}
		default:
			t.Logf("%s: keeps the entries", p.name)
			if gerr != nil || stored.Value.Title != now || holder("b1/"+now) != key || holder("b1/"+was) != "" {
				t.Errorf("%s: %q is %+v %v; %q held by %q, %q by %q", p.name, key, stored, gerr, now, holder("b1/"+now), was, holder("b1/"+was))
			}
		}
	}
}

// A Batch on an indexed Store creating a key that exists fails with
// ErrExists, in a *BatchError naming the action (the service refuses the
// create: the batch does not read a key it creates): the other action's
// document and entries are not written.
func TestIndexedBatchCreateOfExistingKey(t *testing.T) {
	ctx := context.Background()
	s := etagstore.New(tablestore.New(azuritetest.NewTable(t), nil), nil, indexedTitle)
	if _, err := s.Create(ctx, "b1/x", indexed{Title: "x"}); err != nil {
		t.Fatal(err)
	}
	_, err := tablestore.NewBatch(s).Create("b1/y", indexed{Title: "y"}).Create("b1/x", indexed{Title: "x2"}).Submit(ctx)
	var be *tablestore.BatchError
	if !errors.Is(err, etagstore.ErrExists) || !errors.As(err, &be) || be.Index != 1 {
		t.Fatalf("Submit = %v; want ErrExists in a *BatchError naming action 1", err)
	}
	if _, err := s.Get(ctx, "b1/y"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("b1/y after the refused batch: %v, want ErrNotFound", err)
	}
	if _, err := s.GetBy(ctx, indexedTitle, "b1/y"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("the entry of b1/y after the refused batch: %v, want ErrNotFound", err)
	}
}
