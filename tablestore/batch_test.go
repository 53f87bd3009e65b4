package tablestore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/tablestore"
)

func TestBatchCommitsAll(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	a, _ := s.Create(ctx, "p/a", Task{Title: "a", Owner: "ann"})
	b, _ := s.Create(ctx, "p/b", Task{Title: "b"})
	c, _ := s.Create(ctx, "p/c", Task{Title: "c"})
	a.Value.Title = "a2"
	etags, err := tablestore.NewBatch(s).
		Merge(etagstore.Doc[Task]{Key: a.Key, Value: Task{Title: "a2"}, ETag: a.ETag}, "Title").
		Replace(etagstore.Doc[Task]{Key: b.Key, Value: Task{Title: "b2"}, ETag: b.ETag}).
		Delete(c.Key, c.ETag).
		Create("p/d", Task{Title: "d"}).
		Upsert("p/e", Task{Title: "e"}).
		UpsertMerge("p/f", Task{Title: "f", N: 6}).
		Submit(ctx)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	got := map[string]Task{}
	gotETags := map[string]etagstore.ETag{}
	for d, err := range s.List(ctx, "p/") {
		if err != nil {
			t.Fatal(err)
		}
		got[d.Key], gotETags[d.Key] = d.Value, d.ETag
	}
	want := map[string]Task{
		"p/a": {Title: "a2", Owner: "ann"}, "p/b": {Title: "b2"}, "p/d": {Title: "d"}, "p/e": {Title: "e"}, "p/f": {Title: "f", N: 6},
	}
	// Submit returns each action's new ETag, read from the response.
	wantETags := []etagstore.ETag{gotETags["p/a"], gotETags["p/b"], "", gotETags["p/d"], gotETags["p/e"], gotETags["p/f"]}
	if diff := cmp.Diff(wantETags, etags); diff != "" || etags[0] == "" {
		t.Errorf("Submit's ETags (-stored +returned):\n%s", diff)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after batch (-want +got):\n%s", diff)
	}
}

// A failed transaction writes nothing and names the failing action with the
// right error class, parsed from the 202 multipart response.
func TestBatchFailureIndex(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	docs := map[string]etagstore.Doc[Task]{}
	for _, k := range []string{"p/0", "p/1", "p/2", "p/3"} {
		d, err := s.Create(ctx, k, Task{Title: k})
		if err != nil {
			t.Fatal(err)
		}
		docs[k] = d
	}
	stale := docs["p/2"]
	current, err := s.Update(ctx, "p/2", func(x *Task) error { x.Title = "moved on"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func() map[string]etagstore.Doc[Task] {
		m := map[string]etagstore.Doc[Task]{}
		for d, err := range s.List(ctx, "p/") {
			if err != nil {
				t.Fatal(err)
			}
			m[d.Key] = d
		}
		return m
	}
	before := snapshot()
	for _, tc := range []struct {
		name  string
		build func(b *tablestore.Batch[Task])
		index int
		want  error
	}{
		{"stale ETag at 2", func(b *tablestore.Batch[Task]) {
			b.Replace(etagstore.Doc[Task]{Key: "p/0", Value: Task{Title: "x"}, ETag: docs["p/0"].ETag})
			b.Upsert("p/9", Task{Title: "new"})
			b.Replace(etagstore.Doc[Task]{Key: "p/2", Value: Task{Title: "stale"}, ETag: stale.ETag})
			b.Delete("p/3", etagstore.ETagAny)
		}, 2, etagstore.ErrConflict},
		{"create existing at 1", func(b *tablestore.Batch[Task]) {
			b.Delete("p/0", docs["p/0"].ETag)
			b.Create("p/1", Task{Title: "dup"})
		}, 1, etagstore.ErrExists},
		{"delete missing at 3", func(b *tablestore.Batch[Task]) {
			b.Upsert("p/8", Task{})
			b.Upsert("p/7", Task{})
			b.Upsert("p/6", Task{})
			b.Delete("p/nope", etagstore.ETagAny)
		}, 3, etagstore.ErrNotFound},
		{"replace missing at 0", func(b *tablestore.Batch[Task]) {
			b.Replace(etagstore.Doc[Task]{Key: "p/nope", Value: Task{}, ETag: stale.ETag})
			b.Upsert("p/8", Task{})
		}, 0, etagstore.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tablestore.NewBatch(s)
			tc.build(b)
			_, err := b.Submit(ctx)
			var be *tablestore.BatchError
			if !errors.As(err, &be) {
				t.Fatalf("Submit = %v, want *BatchError", err)
			}
			if be.Index != tc.index || !errors.Is(err, tc.want) {
				t.Fatalf("Submit = %v (index %d), want index %d matching %v", err, be.Index, tc.index, tc.want)
			}
			if tc.want == etagstore.ErrConflict {
				var ce *etagstore.ConflictError[Task]
				if !errors.As(err, &ce) {
					t.Fatalf("Submit = %v, want a ConflictError inside", err)
				}
				if diff := cmp.Diff(current, ce.Theirs); diff != "" {
					t.Errorf("Theirs (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(before, snapshot()); diff != "" {
				t.Errorf("a failed batch changed the table (-before +after):\n%s", diff)
			}
		})
	}
}

// Invalid batches are refused before anything is sent.
func TestBatchInvalid(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	if _, err := s.Create(ctx, "p/a", Task{}); err != nil {
		t.Fatal(err)
	}
	big := tablestore.NewBatch(s)
	for i := range tablestore.MaxBatchActions + 1 {
		big.Upsert(fmt.Sprintf("p/r%03d", i), Task{})
	}
	for _, tc := range []struct {
		name string
		b    *tablestore.Batch[Task]
		want error
	}{
		{"empty", tablestore.NewBatch(s), etagstore.ErrInvalidInput},
		{"over 100", big, etagstore.ErrInvalidInput},
		{"replace without ETag", tablestore.NewBatch(s).Upsert("p/z", Task{}).Replace(etagstore.Doc[Task]{Key: "p/a"}), etagstore.ErrETagRequired},
		{"merge without ETag", tablestore.NewBatch(s).Merge(etagstore.Doc[Task]{Key: "p/a"}), etagstore.ErrETagRequired},
		{"delete without ETag", tablestore.NewBatch(s).Delete("p/a", ""), etagstore.ErrETagRequired},
		{"two partitions", tablestore.NewBatch(s).Upsert("p/z", Task{}).Upsert("q/z", Task{}), etagstore.ErrInvalidInput},
		{"one row twice", tablestore.NewBatch(s).Upsert("p/z", Task{}).Delete("p/z", etagstore.ETagAny), etagstore.ErrInvalidInput},
		{"bad key", tablestore.NewBatch(s).Upsert("p/z#", Task{}), etagstore.ErrInvalidKey},
		{"foreign ETag", tablestore.NewBatch(s).Upsert("p/z", Task{}).Replace(etagstore.Doc[Task]{Key: "p/a", ETag: `"0x8D1"`}), etagstore.ErrConflict},
		{"garbage ETag", tablestore.NewBatch(s).Delete("p/a", "garbage"), etagstore.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.b.Submit(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("Submit = %v, want %v", err, tc.want)
			}
		})
	}
	var keys []string
	for d, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, d.Key)
	}
	if diff := cmp.Diff([]string{"p/a"}, keys); diff != "" {
		t.Errorf("refused batches wrote something (-want +got):\n%s", diff)
	}
}

// A batch of one action, which goes as a single write, fails as a batch
// of several does: a *BatchError naming action 0, and for a stale ETag a
// *etagstore.ConflictError holding the current entity.
func TestBatchOfOneAction(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	d, err := s.Create(ctx, "p/0", Task{Title: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.Update(ctx, "p/0", func(x *Task) error { x.Title = "b"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	_, err = tablestore.NewBatch(s).Replace(d).Submit(ctx)
	var be *tablestore.BatchError
	var ce *etagstore.ConflictError[Task]
	if !errors.As(err, &be) || be.Index != 0 || !errors.As(err, &ce) || ce.Theirs.ETag != cur.ETag || ce.Theirs.Value.Title != "b" {
		t.Errorf("stale one-action batch = %v; want a *BatchError of action 0 holding a *ConflictError with the current entity", err)
	}
	_, err = tablestore.NewBatch(s).Create("p/0", Task{}).Submit(ctx)
	if !errors.As(err, &be) || be.Index != 0 || !errors.Is(err, etagstore.ErrExists) {
		t.Errorf("one-action batch creating an existing entity = %v; want a *BatchError of action 0 matching ErrExists", err)
	}
	if msg := err.Error(); strings.Count(msg, "tablestore:") != 1 || strings.Count(msg, "etagstore:") != 1 {
		t.Errorf("a prefix repeats: %q", msg)
	}
}
