package tablestore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// formDoc has a field of each kind a merge may clear: a list, a time and
// a []byte (no property when zero), and a field split across properties.
type formDoc struct {
	Title string
	N     int
	Tags  []string
	When  time.Time
	Blob  []byte
	Body  string `table:"split"`
}

// formWide is formDoc as another program stores it, with X beside it.
type formWide struct {
	Title string
	N     int
	Tags  []string
	When  time.Time
	Blob  []byte
	Body  string `table:"split"`
	X     string
}

var (
	formWhen  = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	formStart = formWide{Title: "t", N: 1, Tags: []string{"x"}, When: formWhen, Blob: []byte("0123456789"),
		Body: strings.Repeat("b", 2*tablestore.MaxPropertySize+10), X: "theirs"}
	// formCleared clears every field but Title and N, and shrinks Body to
	// one property.
	formCleared = formDoc{Title: "t2", N: 2, Body: "short"}
	// formChanged changes every field to values that are properties.
	formChanged = formDoc{Title: "t2", N: 2, Tags: []string{"y"}, When: formWhen.Add(time.Hour), Blob: []byte("ab"), Body: "short"}
	formAll     = []string{"Title", "N", "Tags", "When", "Blob", "Body"}
)

// TestMergeForms: every typed merge that takes an optional list of
// properties, called with none, with all and with one, keeps what it
// should on an entity holding a property T does not know (X) and a field
// split in three parts. A merge that reads first (Merge) writes all of
// T's fields when none are named, clearing those whose value is no
// property and leaving no stale part of a split field; a merge that reads
// nothing (UpsertMerge, Batch.Merge, Batch.UpsertMerge) writes every
// property v has, and cannot remove one, so a zero time or nil []byte
// keeps its stored value (and a shrunk split field's old parts stay,
// unread). X is kept by all of them.
func TestMergeForms(t *testing.T) {
	type form struct {
		name  string
		v     formDoc
		merge func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error
		want  formWide // X is "theirs" in every want
	}
	fromStart := func(f func(*formWide)) formWide { w := formStart; f(&w); return w }
	all := func(v formDoc) formWide { return formWide{v.Title, v.N, v.Tags, v.When, v.Blob, v.Body, "theirs"} }
	merge := func(names ...string) func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error {
		return func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error {
			_, err := tablestore.Merge(ctx, s, d, names...)
			return err
		}
	}
	upsertMerge := func(names ...string) func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error {
		return func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error {
			_, err := tablestore.UpsertMerge(ctx, s, d.Key, d.Value, names...)
			return err
		}
	}
	batchMerge := func(names ...string) func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error {
		return func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error {
			_, err := tablestore.NewBatch(s).Merge(d, names...).Submit(ctx)
			return err
		}
	}
	batchUpsertMerge := func(names ...string) func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error {
		return func(ctx context.Context, s *etagstore.Store[formDoc], d etagstore.Doc[formDoc]) error {
			_, err := tablestore.NewBatch(s).UpsertMerge(d.Key, d.Value, names...).Submit(ctx)
			return err
		}
	}
	// A blind merge cannot remove a property: the zero time and the nil
	// []byte of formCleared leave the stored ones, and Tags (an empty
	// list, a property) is cleared.
	blindCleared := fromStart(func(w *formWide) { w.Title, w.N, w.Tags, w.Body = "t2", 2, nil, "short" })
	forms := []form{
		{"Merge/none/cleared", formCleared, merge(), all(formCleared)},
		{"Merge/none/changed", formChanged, merge(), all(formChanged)},
		{"Merge/all/cleared", formCleared, merge(formAll...), all(formCleared)},
		{"Merge/one", formChanged, merge("Title"), fromStart(func(w *formWide) { w.Title = "t2" })},
		{"Merge/split", formChanged, merge("Body"), fromStart(func(w *formWide) { w.Body = "short" })},
		{"UpsertMerge/none/cleared", formCleared, upsertMerge(), blindCleared},
		{"UpsertMerge/none/changed", formChanged, upsertMerge(), all(formChanged)},
		{"UpsertMerge/all", formChanged, upsertMerge(formAll...), all(formChanged)},
		{"UpsertMerge/one", formChanged, upsertMerge("N"), fromStart(func(w *formWide) { w.N = 2 })},
		{"Batch.Merge/none/cleared", formCleared, batchMerge(), blindCleared},
		{"Batch.Merge/none/changed", formChanged, batchMerge(), all(formChanged)},
		{"Batch.Merge/one", formChanged, batchMerge("Tags"), fromStart(func(w *formWide) { w.Tags = []string{"y"} })},
		{"Batch.UpsertMerge/none/changed", formChanged, batchUpsertMerge(), all(formChanged)},
		{"Batch.UpsertMerge/one", formChanged, batchUpsertMerge("Title"), fromStart(func(w *formWide) { w.Title = "t2" })},
	}
	client := azuritetest.NewTable(t)
	s := tablestore.NewStore[formDoc](client, &tablestore.Options{Partition: "p"}, nil)
	wide := tablestore.NewStore[formWide](client, &tablestore.Options{Partition: "p"}, nil)
	for i, f := range forms {
		for _, any := range []bool{false, true} {
			name := f.name
			if any {
				name += "/ETagAny"
			}
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				key := "f" + string(rune('a'+i))
				if any {
					key += "-any"
				}
				if _, err := wide.Create(ctx, key, formStart); err != nil {
					t.Fatal(err)
				}
				d, err := s.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				d.Value = f.v
				if any {
					d.ETag = etagstore.ETagAny
				}
				if err := f.merge(ctx, s, d); err != nil {
					t.Fatalf("%s: %v", f.name, err)
				}
				got, err := wide.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(f.want, got.Value); diff != "" {
					t.Errorf("%s: stored (-want +got):\n%s", f.name, diff)
				}
				if strings.HasPrefix(f.name, "Merge/") && f.want.Body == "short" {
					wantNoParts(t, client, key, "Body") // a merge that reads can remove them
				}
			})
		}
	}
}

// TestUpsertMergeInsertsNamed: an UpsertMerge on a missing key inserts v
// (every property it has) when no property is named, and only the named
// properties otherwise, alone or in a batch.
func TestUpsertMergeInsertsNamed(t *testing.T) {
	ctx := t.Context()
	s := tablestore.NewStore[formDoc](azuritetest.NewTable(t), &tablestore.Options{Partition: "p"}, nil)
	v := formDoc{Title: "t", N: 3, Tags: []string{"a"}, When: formWhen, Blob: []byte("z"), Body: "b"}
	for _, tc := range []struct {
		key   string
		names []string
		want  formDoc
	}{
		{"none", nil, v},
		{"two", []string{"Title", "N"}, formDoc{Title: "t", N: 3}},
	} {
		if _, err := tablestore.UpsertMerge(ctx, s, tc.key, v, tc.names...); err != nil {
			t.Fatal(err)
		}
		if _, err := tablestore.NewBatch(s).UpsertMerge(tc.key+"-batch", v, tc.names...).Submit(ctx); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{tc.key, tc.key + "-batch"} {
			got, err := s.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Value); diff != "" {
				t.Errorf("UpsertMerge(%q, names %q) on a missing key (-want +got):\n%s", key, tc.names, diff)
			}
		}
	}
}

// wantNoParts fails t if entity key holds a part of field (F‿k).
func wantNoParts(t *testing.T, client *aztables.Client, key, field string) {
	t.Helper()
	resp, err := client.GetEntity(t.Context(), "p", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(resp.Value, &got); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for name := range got {
		if strings.HasPrefix(name, field+"‿") {
			parts = append(parts, name)
		}
	}
	slices.Sort(parts)
	if len(parts) > 0 {
		t.Errorf("entity %q holds %q beside a %s of one property", key, parts, field)
	}
}
