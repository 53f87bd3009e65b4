package tablestore_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/tablestore"
)

// TestIndexedBatchRequests counts, on the wire, the requests a Batch of
// three actions sends on a Store with a unique index (issue 44: the
// entries add none to a write that knows the version it replaces). Its
// one entity group transaction is one request; a batch reads first, all
// its unknown keys in one query (ReadMany), only when an action's
// replaced version is known neither from the Store's version cache nor
// from the Doc's own read: a Create replaces nothing (it is conditioned
// as one), so a batch of Creates reads nothing. Each form ends with the
// entries its writes imply, and no other.
func TestIndexedBatchRequests(t *testing.T) {
	const n = 3
	forms := []struct {
		name     string
		existing bool  // the keys hold documents first
		cached   bool  // written by the batch's Store (else by another's: not in its cache)
		deletes  bool  // the batch deletes the keys
		want     int64 // requests Submit sends
		add      func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], title string)
	}{
		{"Create", false, false, false, 1, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], title string) {
			b.Create(d.Key, indexed{Title: title})
		}},
		{"Replace/cached", true, true, false, 1, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], title string) {
			b.Replace(etagstore.Doc[indexed]{Key: d.Key, Value: indexed{Title: title}, ETag: d.ETag})
		}},
		{"Replace/uncached, a Doc built by hand", true, false, false, 2, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], title string) {
			b.Replace(etagstore.Doc[indexed]{Key: d.Key, Value: indexed{Title: title}, ETag: d.ETag})
		}},
		{"Replace/uncached, a Doc another Store wrote", true, false, false, 1, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], title string) {
			d.Value.Title = title
			b.Replace(d)
		}},
		{"Delete/cached", true, true, true, 1, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], _ string) {
			b.Delete(d.Key, d.ETag)
		}},
		{"Delete/uncached", true, false, true, 2, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], _ string) {
			b.Delete(d.Key, d.ETag)
		}},
		{"Delete ETagAny/cached", true, true, true, 1, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], _ string) {
			b.Delete(d.Key, etagstore.ETagAny)
		}},
		{"Upsert/cached", true, true, false, 1, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], title string) {
			b.Upsert(d.Key, indexed{Title: title})
		}},
		{"Upsert/uncached", true, false, false, 2, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], title string) {
			b.Upsert(d.Key, indexed{Title: title})
		}},
		{"Upsert/missing", false, false, false, 2, func(b *tablestore.Batch[indexed], d etagstore.Doc[indexed], title string) {
			b.Upsert(d.Key, indexed{Title: title})
		}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			ctx := t.Context()
			client, sent := newCountedTable(t)
			s := etagstore.New(tablestore.New(client, nil), nil, indexedTitle)
			writer := s
			if !f.cached {
				writer = etagstore.New(tablestore.New(client, nil), nil, indexedTitle) // another process
			}
			docs := make([]etagstore.Doc[indexed], n)
			for i := range docs {
				docs[i].Key = "b1/k" + strconv.Itoa(i)
				if f.existing {
					var err error
					if docs[i], err = writer.Create(ctx, docs[i].Key, indexed{Title: "was " + strconv.Itoa(i)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			b := tablestore.NewBatch(s)
			for i, d := range docs {
				f.add(b, d, "now "+strconv.Itoa(i))
			}
			before := sent.n.Load()
			if _, err := b.Submit(ctx); err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if got := sent.n.Load() - before; got != f.want {
				t.Errorf("Submit sent %d requests, want %d", got, f.want)
			}
			for i, d := range docs {
				now, was := "b1/now "+strconv.Itoa(i), "b1/was "+strconv.Itoa(i)
				if f.deletes {
					now = ""
				}
				checkHolders(t, s, map[string]string{now: d.Key, was: ""})
			}
		})
	}
}

// checkHolders checks that each value of want (unique title) is held by
// the key it maps to ("": by none). A "" value is skipped.
func checkHolders(t *testing.T, s *etagstore.Store[indexed], want map[string]string) {
	t.Helper()
	for value, key := range want {
		if value == "" {
			continue
		}
		got := ""
		h, err := s.GetBy(t.Context(), indexedTitle, value)
		switch {
		case err == nil:
			got = h.Key
		case !errors.Is(err, etagstore.ErrNotFound):
			t.Fatalf("GetBy %q: %v", value, err)
		}
		if got != key {
			t.Errorf("%q is held by %q, want %q", value, got, key)
		}
	}
}
