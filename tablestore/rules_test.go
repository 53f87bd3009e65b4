package tablestore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

type Task struct {
	Title string
	Owner string
	Done  bool
	N     int64
}

func newTaskStore(t *testing.T, opts *tablestore.Options) (*etagstore.Store[Task], *aztables.Client) {
	t.Helper()
	client := azuritetest.NewTable(t)
	return tablestore.NewStore[Task](client, opts, nil), client
}

// The SDK trap: aztables' UpdateEntity with no IfMatch sends "*" and
// overwrites a newer version. The test first shows the trap is real on
// Azurite, then that a stale Replace through the library never overwrites.
func TestStaleReplaceNeverOverwrites(t *testing.T) {
	ctx := t.Context()
	s, client := newTaskStore(t, &tablestore.Options{Partition: "p"})
	stale, err := s.Create(ctx, "k", Task{Title: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	newer, err := s.Update(ctx, "k", func(x *Task) error { x.Title = "newer"; return nil })
	if err != nil {
		t.Fatal(err)
	}

	// The raw SDK: nil options, no ETag — and the newer version is gone.
	raw, _ := json.Marshal(map[string]any{"PartitionKey": "p", "RowKey": "raw", "Title": "v1"})
	if _, err := client.AddEntity(ctx, raw, nil); err != nil {
		t.Fatal(err)
	}
	rawNewer, _ := json.Marshal(map[string]any{"PartitionKey": "p", "RowKey": "raw", "Title": "newer"})
	if _, err := client.UpdateEntity(ctx, rawNewer, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateEntity(ctx, raw, nil); err != nil {
		t.Fatalf("raw UpdateEntity without IfMatch: %v (expected the SDK to send * and succeed)", err)
	}

	// The library: the stale ETag is sent and refused.
	stale.Value.Title = "stale write"
	_, err = s.Replace(ctx, stale)
	var ce *etagstore.ConflictError[Task]
	if !errors.As(err, &ce) {
		t.Fatalf("stale Replace = %v, want *ConflictError", err)
	}
	if diff := cmp.Diff(newer, ce.Theirs); diff != "" {
		t.Errorf("Theirs (-want +got):\n%s", diff)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || got.Value.Title != "newer" {
		t.Fatalf("stored after stale Replace = %+v, %v; want the newer version", got, err)
	}
	// Empty ETags are refused at every entry point.
	b := tablestore.New(client, &tablestore.Options{Partition: "p"})
	if _, err := b.Write(ctx, "k", driver.Write{Data: []byte(`{"Title":"blind"}`), Cond: driver.Cond{Kind: driver.CondIfMatch}}); !errors.Is(err, etagstore.ErrETagRequired) {
		t.Errorf("Backend.Write(IfMatch \"\") = %v", err)
	}
	if err := b.Delete(ctx, "k", ""); !errors.Is(err, etagstore.ErrETagRequired) {
		t.Errorf("Backend.Delete(IfMatch \"\") = %v", err)
	}
	if _, err := tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: "k", Value: Task{Title: "blind"}}, "Title"); !errors.Is(err, etagstore.ErrETagRequired) {
		t.Errorf("Merge without ETag = %v", err)
	}
	if got2, _ := s.Get(ctx, "k"); got2.ETag != got.ETag {
		t.Errorf("the refused writes changed the entity: %+v", got2)
	}
}

func TestPartitionRowKeys(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	for _, k := range []string{"b/1", "a/2", "a/1", "ab/1", "a/10"} {
		if _, err := s.Create(ctx, k, Task{Title: k}); err != nil {
			t.Fatalf("Create(%q): %v", k, err)
		}
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a/1", "a/10", "a/2", "ab/1", "b/1"}},
		{"a", []string{"a/1", "a/10", "a/2", "ab/1"}},
		{"a/", []string{"a/1", "a/10", "a/2"}},
		{"a/1", []string{"a/1", "a/10"}},
		{"c", nil},
	} {
		var got []string
		for d, err := range s.List(ctx, tc.prefix) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d.Key)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", tc.prefix, diff)
		}
	}
	for _, bad := range []string{"noslash", "a/b/c", "/row", "part/", "a#/b", "a/b?", `a\b/c`, "a/" + strings.Repeat("x", 513), "a/\u0085"} {
		if _, err := s.Create(ctx, bad, Task{}); !errors.Is(err, etagstore.ErrInvalidKey) {
			t.Errorf("Create(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	if _, err := s.Create(ctx, "a/"+strings.Repeat("x", 512), Task{}); err != nil {
		t.Errorf("Create with a 1 KiB row key: %v", err)
	}
}

func TestMergeMode(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, &tablestore.Options{Partition: "p"})
	d, err := s.Create(ctx, "k", Task{Title: "t", Owner: "ann", N: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Merge only Title: Owner and N keep their stored values even though
	// the value passed has them zero.
	etag, err := tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: "k", Value: Task{Title: "merged"}, ETag: d.ETag}, "Title")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, "k")
	if want := (Task{Title: "merged", Owner: "ann", N: 1}); got.Value != want || got.ETag != etag {
		t.Fatalf("after Merge: %+v (ETag %s), want %+v with ETag %s", got.Value, got.ETag, want, etag)
	}
	// The old ETag is stale now.
	_, err = tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: "k", Value: Task{Owner: "bob"}, ETag: d.ETag}, "Owner")
	var ce *etagstore.ConflictError[Task]
	if !errors.As(err, &ce) || ce.Theirs.Value.Title != "merged" {
		t.Fatalf("stale Merge = %v, want a ConflictError holding the merged version", err)
	}
	// ETagAny merges into whatever is there; a missing entity is ErrNotFound.
	if _, err := tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: "k", Value: Task{Done: true}, ETag: etagstore.ETagAny}, "Done"); err != nil {
		t.Fatal(err)
	}
	if _, err := tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: "gone", Value: Task{Done: true}, ETag: etagstore.ETagAny}, "Done"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Merge(missing) = %v, want ErrNotFound", err)
	}
	if _, err := tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: "k", ETag: etagstore.ETagAny}, "Nope"); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Merge of an unknown property = %v, want ErrInvalidInput", err)
	}
	// UpsertMerge: insert when missing, merge without a check when present.
	if _, err := tablestore.UpsertMerge(ctx, s, "new", Task{Title: "fresh", N: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := tablestore.UpsertMerge(ctx, s, "new", Task{Owner: "cy"}, "Owner"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Get(ctx, "new")
	if want := (Task{Title: "fresh", Owner: "cy", N: 7}); got.Value != want {
		t.Fatalf("after UpsertMerge: %+v, want %+v", got.Value, want)
	}
	got, _ = s.Get(ctx, "k")
	if want := (Task{Title: "merged", Owner: "ann", Done: true, N: 1}); got.Value != want {
		t.Fatalf("after Merge(ETagAny): %+v, want %+v", got.Value, want)
	}
}

func TestFilterQuoting(t *testing.T) {
	injection := "x' or Title ne 'x"
	for _, tc := range []struct {
		f    tablestore.Filter
		want string
	}{
		{tablestore.Eq("Title", "O'Brien"), "Title eq 'O''Brien'"},
		{tablestore.Eq("Title", injection), "Title eq 'x'' or Title ne ''x'"},
		{tablestore.Gt("N", int64(5)).And(tablestore.Eq("Done", false)), "(N gt 5L) and (Done eq false)"},
		{tablestore.Eq("ID", tablestore.GUID("0f8fad5b-d9cb-469f-a165-70867728950e")), "ID eq guid'0f8fad5b-d9cb-469f-a165-70867728950e'"},
		{tablestore.Le("F", 2.0).Or(tablestore.Eq("I", int32(3))), "(F le 2.0) or (I eq 3)"},
		{tablestore.Not(tablestore.Eq("B", []byte{0xab})), "not (B eq X'ab')"},
		{tablestore.Filter{}.And(tablestore.Eq("A", "a")), "A eq 'a'"},
	} {
		if got := tc.f.String(); got != tc.want || tc.f.Err() != nil {
			t.Errorf("filter = %q (err %v), want %q", got, tc.f.Err(), tc.want)
		}
	}
	if f := tablestore.Eq("Title) or (1 eq 1", "x"); f.Err() == nil {
		t.Errorf("a property name with OData syntax was accepted: %q", f)
	}

	// Against the service: quotes in values match literally and cannot widen the query.
	ctx := t.Context()
	s, _ := newTaskStore(t, &tablestore.Options{Partition: "p"})
	for i, title := range []string{"O'Brien", "x", "plain", injection} {
		if _, err := s.Create(ctx, string(rune('a'+i)), Task{Title: title, N: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	b := s.Backend().(*tablestore.Backend)
	count := func(f tablestore.Filter) []string {
		var titles []string
		for it, err := range b.Query(ctx, f) {
			if err != nil {
				t.Fatal(err)
			}
			var task Task
			if err := (tablestore.EntityCodec{}).Unmarshal(it.Data, &task); err != nil {
				t.Fatal(err)
			}
			titles = append(titles, task.Title)
		}
		return titles
	}
	if got := count(tablestore.Eq("Title", "O'Brien")); !cmp.Equal(got, []string{"O'Brien"}) {
		t.Errorf("Eq O'Brien matched %q", got)
	}
	if got := count(tablestore.Eq("Title", injection)); !cmp.Equal(got, []string{injection}) {
		t.Errorf("the injection value matched %q, want only itself", got)
	}
	if got := count(tablestore.Ge("N", int64(2))); !cmp.Equal(got, []string{"plain", injection}) {
		t.Errorf("N ge 2 matched %q", got)
	}
	var typed []string
	for d, err := range tablestore.Query(ctx, s, tablestore.Eq("Title", "O'Brien").Or(tablestore.Eq("N", int64(1)))) {
		if err != nil {
			t.Fatal(err)
		}
		typed = append(typed, d.Value.Title+"@"+d.Key)
	}
	if diff := cmp.Diff([]string{"O'Brien@a", "x@b"}, typed); diff != "" {
		t.Errorf("typed Query (-want +got):\n%s", diff)
	}
	for _, err := range b.Query(ctx, tablestore.Eq("bad name", "x")) {
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Query with a bad property name = %v, want ErrInvalidInput", err)
		}
	}
}

func TestListPaging(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	s := tablestore.NewStore[Task](client, &tablestore.Options{Partition: "p", PageSize: 3}, nil)
	var want []string
	for i := range 10 {
		k := string(rune('a' + i))
		want = append(want, k)
		if _, err := s.Create(ctx, k, Task{N: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for d, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Key)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged List (-want +got):\n%s", diff)
	}
}
