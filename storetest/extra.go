package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Older and Newer are two versions of one document type, as two versions
// of an app run them during a deploy: Newer has fields Older lacks, of
// every kind a backend stores (on tables: strings, Int32 and Int64 of every
// size, Double, DateTime, Binary, a GUID, and JSON for nested structs,
// lists and maps).
type Older struct {
	Title string
	N     int64
	Addr  struct{ City string }
	Items []struct{ Name string }
}

// bump is the older type's change in the write paths RunExtra runs: a
// counter, a member of a nested struct, and an element of a list, each of
// which the newer type holds more beside.
func bump(o *Older) {
	o.N++
	o.Addr.City += "+"
	if len(o.Items) > 0 {
		o.Items[0].Name += "+"
	}
}

// Newer is Older with more fields.
type Newer struct {
	Title string
	N     int64
	Addr  struct{ City, Zip string }
	Items []struct {
		Name string
		Qty  int
	}
	S      string
	I8     int8
	I16    int16
	I32    int32
	I64    int64
	Int    int
	U8     uint8
	U16    uint16
	U32    uint32
	U64    uint64
	F32    float32
	F64    float64
	On     bool
	When   time.Time
	Bytes  []byte
	ID     string `table:"guid"`
	Nested struct {
		A string
		B []int
	}
	List []string
	Map  map[string]int
}

// newerOnly is a Newer whose own fields (those Older lacks) all hold values.
func newerOnly(title string) Newer {
	n := Newer{Title: title, S: "ünïcode ✓", I8: -8, I16: -1600, I32: -320000, I64: -1 << 40, Int: 12345,
		U8: 200, U16: 60000, U32: 4000000000, U64: 1<<63 + 5, F32: 1.5, F64: -2.25e-7, On: true,
		When:  time.Date(2026, 11, 26, 5, 30, 0, 123456700, time.UTC),
		Bytes: []byte{0, 1, 2, 250}, ID: "6f9619ff-8b86-d011-b42d-00c04fc964ff",
		List: []string{"a", "b"}, Map: map[string]int{"x": 1, "y": 2}}
	n.Nested.A, n.Nested.B = "deep", []int{1, 2, 3}
	n.Addr.City, n.Addr.Zip = "Lyon", "69001"
	n.Items = append(n.Items, struct {
		Name string
		Qty  int
	}{"pen", 3}, struct {
		Name string
		Qty  int
	}{"ink", 7})
	return n
}

// RunExtra checks that a Store of an older type keeps the members of a
// document written by a newer type — every field, exactly, with its type —
// through every write that starts from a read, and that the writes that
// start from nothing write the older type alone.
func RunExtra(t *testing.T, newBackend NewBackend) {
	t.Helper()
	for _, tc := range []struct {
		name  string
		opts  etagstore.Options
		write func(ctx context.Context, s *etagstore.Store[Older], key string) error
	}{
		{"Update", etagstore.Options{}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			_, err := s.Update(ctx, key, func(o *Older) error { bump(o); return nil })
			return err
		}},
		{"UpdateUngrouped", etagstore.Options{DisableGroupCommit: true}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			_, err := s.Update(ctx, key, func(o *Older) error { bump(o); return nil })
			return err
		}},
		{"UpdateTwice", etagstore.Options{}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			for range 2 { // the second starts from the version the first wrote, kept
				if _, err := s.Update(ctx, key, func(o *Older) error { bump(o); return nil }); err != nil {
					return err
				}
			}
			return nil
		}},
		{"UpdateCached", etagstore.Options{CacheSize: 8}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			if _, err := s.Get(ctx, key); err != nil { // cache it
				return err
			}
			_, err := s.Update(ctx, key, func(o *Older) error { bump(o); return nil })
			return err
		}},
		{"Save", etagstore.Options{}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			base, err := s.Get(ctx, key)
			if err != nil {
				return err
			}
			edited := base.Value
			edited.Items = append(edited.Items[:0:0], edited.Items...)
			bump(&edited)
			_, err = s.Save(ctx, base, edited, nil)
			return err
		}},
		{"ReplaceOfGet", etagstore.Options{}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			d, err := s.Get(ctx, key)
			if err != nil {
				return err
			}
			bump(&d.Value)
			_, err = s.Replace(ctx, d)
			return err
		}},
		{"ReplaceOfPage", etagstore.Options{}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			p, err := s.Page(ctx, key, 1, "")
			if err != nil || len(p.Docs) != 1 {
				return errors.Join(err, errors.New("no page"))
			}
			d := p.Docs[0]
			bump(&d.Value)
			_, err = s.Replace(ctx, d)
			return err
		}},
		{"ReplaceOfUpdate", etagstore.Options{}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			d, err := s.Update(ctx, key, func(o *Older) error { bump(o); return nil })
			if err != nil {
				return err
			}
			bump(&d.Value)
			_, err = s.Replace(ctx, d)
			return err
		}},
		{"Transact", etagstore.Options{}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			if s.Backend().Abilities().Commit == nil {
				_, err := s.Update(ctx, key, func(o *Older) error { bump(o); return nil })
				return err
			}
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[Older]) error {
				o, err := tx.Get(key)
				if err != nil {
					return err
				}
				bump(&o)
				return tx.Put(key, o)
			})
			return err
		}},
		{"TransactConcurrent", etagstore.Options{}, func(ctx context.Context, s *etagstore.Store[Older], key string) error {
			if s.Backend().Abilities().Commit == nil {
				_, err := s.Update(ctx, key, func(o *Older) error { bump(o); return nil })
				return err
			}
			// Four at once: one Store's concurrent transactions share a
			// commit (group commit), each bump on the one before it.
			errs := make([]error, 4)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Go(func() {
					_, errs[i] = s.Transact(ctx, func(tx *etagstore.Tx[Older]) error {
						o, err := tx.Get(key)
						if err != nil {
							return err
						}
						bump(&o)
						return tx.Put(key, o)
					})
				})
			}
			wg.Wait()
			return errors.Join(errs...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			b := newBackend(t)
			newer := etagstore.New[Newer](b, nil)
			older := etagstore.New[Older](b, &tc.opts)
			want := newerOnly("doc")
			if _, err := newer.Create(ctx, "extra", want); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(ctx, older, "extra"); err != nil {
				t.Fatalf("the older type's write: %v", err)
			}
			got, err := newer.Get(ctx, "extra")
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "TransactConcurrent" && b.Abilities().Commit != nil && got.Value.N != 4 {
				t.Errorf("four concurrent transactions' bumps: N = %d, want 4", got.Value.N)
			}
			if got.Value.N < 1 || !strings.HasSuffix(got.Value.Addr.City, "+") || !strings.HasSuffix(got.Value.Items[0].Name, "+") {
				t.Errorf("the older type's change is lost: N = %d, Addr.City %q, Items[0].Name %q", got.Value.N, got.Value.Addr.City, got.Value.Items[0].Name)
			}
			// The older type's change, and every member it does not know
			// (Addr.Zip, each item's Qty) as the newer type wrote it.
			want.N, want.Addr.City, want.Items[0].Name = got.Value.N, got.Value.Addr.City, got.Value.Items[0].Name
			if diff := cmp.Diff(want, got.Value); diff != "" {
				t.Errorf("the newer type's fields after the older type's write (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("FromNothing", func(t *testing.T) { testExtraFromNothing(t, newBackend(t)) })
	t.Run("TransactRewrite", func(t *testing.T) { testTransactRewrite(t, newBackend(t)) })
	t.Run("CaseOnlyRename", func(t *testing.T) { testCaseOnlyRename(t, newBackend(t)) })
	t.Run("OmitEmpty", func(t *testing.T) { testOmitEmpty(t, newBackend(t)) })
	t.Run("Without", func(t *testing.T) { testWithout(t, newBackend(t)) })
	t.Run("DeepChanges", func(t *testing.T) { testDeepChanges(t, newBackend(t)) })
	t.Run("OlderAndNewerRacing", func(t *testing.T) { testOlderAndNewerRacing(t, newBackend(t)) })
	t.Run("ReplaceAny", func(t *testing.T) { testReplaceAnyOfRead(t, newBackend(t)) })
	t.Run("RepeatedMembers", func(t *testing.T) { testRepeatedMembers(t, newBackend(t)) })
}

// testTransactRewrite: in one transaction, a Put of a key the
// transaction deleted, or upserted, writes the older type alone, as the
// same writes in a row would; a create after a delete keeps nothing of
// the deleted document's bookkeeping (its fencing token: a writer fenced
// with a lower one may write it).
func testTransactRewrite(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	newer := etagstore.New[Newer](b, nil)
	older := etagstore.New[Older](b, nil)
	if b.Abilities().Commit == nil { // blobs: no transactions, refused before fn runs
		_, err := older.Transact(ctx, func(*etagstore.Tx[Older]) error { return errors.New("fn ran") })
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Transact without Commit = %v, want errors.ErrUnsupported", err)
		}
		return
	}
	for _, key := range []string{"deleted", "upserted"} {
		if _, err := newer.Create(etagstore.WithFence(ctx, 5), key, newerOnly(key)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := older.Transact(ctx, func(tx *etagstore.Tx[Older]) error {
		if err := tx.Delete("deleted"); err != nil {
			return err
		}
		if err := tx.Put("deleted", Older{Title: "deleted"}); err != nil {
			return err
		}
		if err := tx.Upsert("upserted", Older{Title: "upserted"}); err != nil {
			return err
		}
		o, err := tx.Get("upserted")
		if err != nil {
			return err
		}
		o.N = 7
		return tx.Put("upserted", o)
	})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]Newer{"deleted": {Title: "deleted"}, "upserted": {Title: "upserted", N: 7}} {
		got, err := newer.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got.Value); diff != "" {
			t.Errorf("%s: the older type alone (-want +got):\n%s", key, diff)
		}
	}
	if _, err := older.Update(etagstore.WithFence(ctx, 3), "deleted", func(o *Older) error { o.N++; return nil }); err != nil {
		t.Errorf("a write fenced with 3 after the document under token 5 was deleted and created again: %v", err)
	}
}

// testWithout: Extra.Without drops one member the older type does not
// know, on purpose, and the Replace keeps the others.
func testWithout(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	type wide struct {
		Title      string
		N          int64
		Note, Tags string
	}
	newer := etagstore.New[wide](b, nil)
	older := etagstore.New[Older](b, nil)
	if _, err := newer.Create(ctx, "w", wide{Title: "a", N: 1, Note: "drop me", Tags: "keep me"}); err != nil {
		t.Fatal(err)
	}
	d, err := older.Get(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	d.Extra = d.Extra.Without("Note")
	if names := d.Extra.Names(); slices.Contains(names, "Note") || !slices.Contains(names, "Tags") {
		t.Errorf("Extra names after Without(Note): %q", names)
	}
	d.Value.N++
	if _, err := older.Replace(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := newer.Get(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wide{Title: "a", N: 2, Tags: "keep me"}, got.Value); diff != "" {
		t.Errorf("after Without(Note) and Replace (-want +got):\n%s", diff)
	}
}

// testDeepChanges: the older type appends to a list, removes from it and
// reorders it; each element it kept as it was keeps what the newer type
// stored in it (an element appended has none, an element removed is
// gone), and so does the nested struct it did not change.
func testDeepChanges(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	newer := etagstore.New[Newer](b, nil)
	older := etagstore.New[Older](b, nil)
	n := newerOnly("deep")
	n.Items = append(n.Items, struct {
		Name string
		Qty  int
	}{"cap", 9})
	if _, err := newer.Create(ctx, "deep", n); err != nil {
		t.Fatal(err)
	}
	if _, err := older.Update(ctx, "deep", func(o *Older) error {
		o.Items = append(o.Items[1:], struct{ Name string }{"new"}) // pen removed, new appended
		o.Items[0], o.Items[1] = o.Items[1], o.Items[0]             // cap, ink: moved
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := newer.Get(ctx, "deep")
	if err != nil {
		t.Fatal(err)
	}
	want := n
	want.Items = []struct {
		Name string
		Qty  int
	}{{"cap", 9}, {"ink", 7}, {"new", 0}}
	if diff := cmp.Diff(want, got.Value); diff != "" {
		t.Errorf("after the older type's list changes (-want +got):\n%s", diff)
	}
}

// testOlderAndNewerRacing: 16 goroutines of the older type and 16 of the
// newer race Updates on one key, each side incrementing a counter of its
// own (the newer's a field the older does not know); every increment of
// both survives, and so does every other field of the newer type.
func testOlderAndNewerRacing(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	newer := etagstore.New[Newer](b, nil)
	older := etagstore.New[Older](b, nil)
	if _, err := newer.Create(ctx, "race", newerOnly("race")); err != nil {
		t.Fatal(err)
	}
	const goroutines, rounds = 16, 2
	errs := make(chan error, 2*goroutines*rounds)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range rounds {
				_, err := older.Update(ctx, "race", func(o *Older) error { o.N++; return nil })
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			for range rounds {
				_, err := newer.Update(ctx, "race", func(n *Newer) error { n.Int++; return nil })
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := newer.Get(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	want := newerOnly("race")
	want.N, want.Int = goroutines*rounds, want.Int+goroutines*rounds
	if diff := cmp.Diff(want, got.Value); diff != "" {
		t.Errorf("after the race (-want +got):\n%s", diff)
	}
}

// testExtraFromNothing: Upsert, and Replace of a Doc built by hand or whose
// Extra was cleared, write the older type alone.
func testExtraFromNothing(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	newer := etagstore.New[Newer](b, nil)
	older := etagstore.New[Older](b, nil)
	for _, key := range []string{"upsert", "by-hand", "dropped"} {
		if _, err := newer.Create(ctx, key, newerOnly(key)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := older.Get(ctx, "dropped")
	if err != nil {
		t.Fatal(err)
	}
	if d.Extra.Empty() || len(d.Extra.Names()) < 10 {
		t.Errorf("a document of the newer type read by the older one: Extra holds %q", d.Extra.Names())
	}
	d.Extra = etagstore.Extra{}
	if _, err := older.Replace(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := older.Upsert(ctx, "upsert", Older{Title: "upsert"}); err != nil {
		t.Fatal(err)
	}
	h, err := older.Get(ctx, "by-hand")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := older.Replace(ctx, etagstore.Doc[Older]{Key: "by-hand", Value: Older{Title: "by-hand"}, ETag: h.ETag}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"upsert", "by-hand", "dropped"} {
		got, err := newer.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want := Newer{Title: key}
		if key == "dropped" { // the older type's value, as read
			want.Addr.City = "Lyon"
			want.Items = append(want.Items, struct {
				Name string
				Qty  int
			}{Name: "pen"}, struct {
				Name string
				Qty  int
			}{Name: "ink"})
		}
		if diff := cmp.Diff(want, got.Value); diff != "" {
			t.Errorf("%s: the older type alone (-want +got):\n%s", key, diff)
		}
		if o, _ := older.Get(ctx, key); !o.Extra.Empty() {
			t.Errorf("%s: Extra %q after a write of the older type alone", key, o.Extra.Names())
		}
	}
}

// Renamed is Older after a case-only rename of Title (json:"title").
type Renamed struct {
	Title string `json:"title"`
	N     int64
}

// testCaseOnlyRename: the newer type renames Title to "title" by case
// alone. Its writes over a document the older type wrote are what its
// reads then see: its Update's result is its next Get's, and a counter it
// increments moves (JSON documents: encoding/json decodes "Title" into
// the field "title", so it is the type's member and is replaced, never
// kept beside the new one to win on decode).
func testCaseOnlyRename(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	older := etagstore.New[Older](b, nil)
	renamed := etagstore.New[Renamed](b, nil)
	if _, err := older.Create(ctx, "renamed", Older{Title: "a", N: 1}); err != nil {
		t.Fatal(err)
	}
	for i, title := range []string{"b", "c"} {
		d, err := renamed.Update(ctx, "renamed", func(r *Renamed) error { r.Title, r.N = title, r.N+1; return nil })
		if err != nil {
			t.Fatal(err)
		}
		got, err := renamed.Get(ctx, "renamed")
		if err != nil {
			t.Fatal(err)
		}
		want := Renamed{Title: title, N: int64(i + 2)}
		if d.Value != want || got.Value != want {
			t.Errorf("after Update %d: Update returned %+v, Get %+v; want %+v", i+1, d.Value, got.Value, want)
		}
	}
}

// Sparse is a document whose fields are left out when empty.
type Sparse struct {
	Title string
	Owner string            `json:",omitempty"`
	Count int               `json:",omitempty"`
	Tags  []string          `json:",omitempty"`
	At    time.Time         `json:",omitzero"`
	Attrs map[string]string `json:",omitempty"`
}

// testOmitEmpty: a field tagged omitempty (or omitzero) whose value is
// empty is no member of the stored document (on tables: no property), on
// every backend; set, it is stored, and emptied again, it is gone again.
func testOmitEmpty(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	s := etagstore.New[Sparse](b, nil)
	stored := func() map[string]any {
		t.Helper()
		it, err := b.Read(ctx, "sparse")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(it.Data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	absent := func(when string, names ...string) {
		t.Helper()
		m := stored()
		for _, n := range names {
			if _, ok := m[n]; ok {
				t.Errorf("%s: the stored document holds %s: %v", when, n, m)
			}
		}
	}
	if _, err := s.Create(ctx, "sparse", Sparse{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	absent("created empty", "Owner", "Count", "Tags", "At", "Attrs")
	full := Sparse{Title: "t", Owner: "o", Count: 2, Tags: []string{"a"}, At: time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), Attrs: map[string]string{"k": "v"}}
	if _, err := s.Update(ctx, "sparse", func(v *Sparse) error { *v = full; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "sparse"); err != nil || !cmp.Equal(full, got.Value) {
		t.Errorf("set: %+v, %v; want %+v", got.Value, err, full)
	}
	if _, err := s.Update(ctx, "sparse", func(v *Sparse) error { *v = Sparse{Title: "t2"}; return nil }); err != nil {
		t.Fatal(err)
	}
	absent("emptied", "Owner", "Count", "Tags", "At", "Attrs")
	if got, err := s.Get(ctx, "sparse"); err != nil || !cmp.Equal(Sparse{Title: "t2"}, got.Value) {
		t.Errorf("emptied: %+v, %v", got.Value, err)
	}
}
