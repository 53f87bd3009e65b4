package storetest

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/etagstore/etagstore"
)

// The cases in this file check one rule, on every backend and its codec:
// a value comes back exactly, or it is refused before anything is sent
// with an error that matches ErrInvalidInput and names the field.

// invalidUTF8 is a string that is not valid UTF-8; encoding/json would
// store "a\uFFFDb" instead.
const invalidUTF8 = "a\xffb"

// exactOrRefused creates key with v and checks that either Get returns v
// exactly, or the Create was refused with ErrInvalidInput naming names and
// nothing was stored. It reports whether v was stored.
func exactOrRefused[T any](t *testing.T, s *etagstore.Store[T], key string, v T, names string) bool {
	t.Helper()
	ctx := t.Context()
	d, err := s.Create(ctx, key, v)
	if err != nil {
		wantRefused(t, err, names)
		if _, err := s.Get(ctx, key); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("Get(%q) after a refused Create = %v, want ErrNotFound", key, err)
		}
		return false
	}
	if diff := cmp.Diff(v, d.Value, cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("Create(%q) returned a changed value (-want +got):\n%s", key, diff)
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Errorf("Get(%q) after Create: %v", key, err)
		return true
	}
	if diff := cmp.Diff(v, got.Value, cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("Get(%q) did not return what was stored (-want +got):\n%s", key, diff)
	}
	return true
}

// wantRefused checks that err matches ErrInvalidInput and names names.
func wantRefused(t *testing.T, err error, names string) {
	t.Helper()
	switch {
	case !errors.Is(err, etagstore.ErrInvalidInput):
		t.Errorf("err = %v, want ErrInvalidInput", err)
	case !strings.Contains(err.Error(), names):
		t.Errorf("err = %v, which does not name %s", err, names)
	}
}

// testInvalidUTF8: a string that is not valid UTF-8 is refused by every
// write, naming the field, and nothing changes; valid non-ASCII text comes
// back exactly.
func testInvalidUTF8(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	_, err := s.Create(ctx, "new", Page{Title: invalidUTF8})
	wantRefused(t, err, "Title")
	_, err = s.Upsert(ctx, "new", Page{Body: invalidUTF8})
	wantRefused(t, err, "Body")
	_, err = s.Update(ctx, "new", func(p *Page) error { p.Title = invalidUTF8; return nil }, etagstore.CreateIfMissing())
	wantRefused(t, err, "Title")
	wantMissing(t, s, "new")

	d := mustCreate(t, s, "p", Page{Title: "é€😀\u00a0\u2028", Body: "ok", N: 1})
	wantStored(t, s, d)
	_, err = s.Replace(ctx, etagstore.Doc[Page]{Key: "p", Value: Page{Body: invalidUTF8}, ETag: d.ETag})
	wantRefused(t, err, "Body")
	_, err = s.Replace(ctx, etagstore.Doc[Page]{Key: "p", Value: Page{Body: invalidUTF8}, ETag: etagstore.ETagAny})
	wantRefused(t, err, "Body")
	_, err = s.Upsert(ctx, "p", Page{Title: invalidUTF8})
	wantRefused(t, err, "Title")
	_, err = s.Update(ctx, "p", func(p *Page) error { p.Body += invalidUTF8; return nil })
	wantRefused(t, err, "Body")
	_, err = s.Save(ctx, d, Page{Title: invalidUTF8}, nil)
	wantRefused(t, err, "Title")
	wantStored(t, s, d)

	// Inside slices, maps (values and keys) and nested structs, on the
	// backend's own codec.
	type tagged struct {
		Tags  []string
		Attrs map[string]string
		Inner struct{ Name string }
	}
	ts := etagstore.New[tagged](s.Backend(), nil)
	exactOrRefused(t, ts, "tags", tagged{Tags: []string{"ok", invalidUTF8}}, "Tags[1]")
	exactOrRefused(t, ts, "value", tagged{Attrs: map[string]string{"k": invalidUTF8}}, `Attrs["k"]`)
	exactOrRefused(t, ts, "key", tagged{Attrs: map[string]string{invalidUTF8: "v"}}, "Attrs")
	inner := tagged{}
	inner.Inner.Name = invalidUTF8
	exactOrRefused(t, ts, "inner", inner, "Inner.Name")
	for _, key := range []string{"tags", "value", "key", "inner"} {
		if _, err := ts.Get(ctx, key); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("a document with invalid UTF-8 was stored under %q: Get = %v", key, err)
		}
	}
	if !exactOrRefused(t, ts, "valid", tagged{Tags: []string{"é"}, Attrs: map[string]string{"ü": "😀"}}, "") {
		t.Errorf("valid UTF-8 was refused")
	}
}

// testNonFiniteFloat: NaN and ±Inf come back exactly (table properties
// hold them) or are refused naming the field (JSON cannot hold them).
func testNonFiniteFloat(t *testing.T, s *etagstore.Store[Page]) {
	type measure struct {
		Name string
		X    float64
		Y    float32
		Vals []float64
	}
	ms := etagstore.New[measure](s.Backend(), nil)
	for i, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		key := string(rune('a' + i))
		exactOrRefused(t, ms, "x"+key, measure{Name: "x", X: f}, "X")
		exactOrRefused(t, ms, "y"+key, measure{Name: "y", Y: float32(f)}, "Y")
		exactOrRefused(t, ms, "v"+key, measure{Name: "v", Vals: []float64{1, f}}, "Vals[1]")
	}
	if !exactOrRefused(t, ms, "finite", measure{X: math.MaxFloat64, Y: math.SmallestNonzeroFloat32, Vals: []float64{-0.5}}, "") {
		t.Errorf("finite floats were refused")
	}
	// An Update that makes a value non-finite changes nothing if refused.
	d, err := ms.Create(t.Context(), "upd", measure{X: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Update(t.Context(), "upd", func(m *measure) error { m.X = math.NaN(); return nil }); err != nil {
		wantRefused(t, err, "X")
		if got, err := ms.Get(t.Context(), "upd"); err != nil || got.Value.X != 1 || got.ETag != d.ETag {
			t.Errorf("after a refused Update: Get = %+v, %v; want X 1 at the same ETag", got, err)
		}
	}
}

// testTimeRange: times come back exactly (as the same instant) or are
// refused naming the field; what no backend can hold (past 9999) is
// refused everywhere.
func testTimeRange(t *testing.T, s *etagstore.Store[Page]) {
	type stamp struct{ At time.Time }
	type event struct {
		When time.Time
		Log  []stamp
	}
	es := etagstore.New[event](s.Backend(), nil)
	date := func(y int) time.Time { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC) }
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)
	for key, v := range map[string]event{
		"zero":   {},
		"now":    {When: time.Date(2026, 5, 6, 7, 8, 9, 123456700, time.FixedZone("x", 5400))},
		"first":  {When: date(1601)},
		"last":   {When: last},
		"before": {When: date(1600)},
		"local":  {When: time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC).In(time.FixedZone("east", 2*3600))},
	} {
		exactOrRefused(t, es, key, v, "When")
	}
	for _, key := range []string{"zero", "now", "first", "last"} {
		if _, err := es.Get(t.Context(), key); err != nil {
			t.Errorf("time %s (in every backend's range) was refused: Get = %v", key, err)
		}
	}
	_, err := es.Create(t.Context(), "after", event{When: date(10000)})
	wantRefused(t, err, "When")
	_, err = es.Create(t.Context(), "after", event{When: last.Add(100 * time.Nanosecond)})
	wantRefused(t, err, "When")
	_, err = es.Create(t.Context(), "after", event{Log: []stamp{{}, {At: date(10000)}}})
	wantRefused(t, err, "Log[1].At")
	if _, err := es.Get(t.Context(), "after"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("a time past 9999 was stored: Get = %v", err)
	}
}

// testDocumentTypes: a Store of pointers to structs works like one of
// structs; documents of other types (a nil pointer, an int, a slice, a
// map) come back exactly or are refused naming the type.
func testDocumentTypes(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	ps := etagstore.New[*Page](s.Backend(), nil)
	if !exactOrRefused(t, ps, "ptr", &Page{Title: "t", Body: "b", N: 1}, "") {
		t.Fatalf("a pointer to a struct was refused")
	}
	d, err := ps.Update(ctx, "ptr", func(p **Page) error { (*p).N++; return nil })
	if err != nil {
		t.Fatalf("Update of a pointer document: %v", err)
	}
	if d.Value == nil || d.Value.N != 2 {
		t.Fatalf("Update returned %+v, want N 2", d.Value)
	}
	got, err := ps.Get(ctx, "ptr")
	if err != nil || got.Value == nil || *got.Value != (Page{Title: "t", Body: "b", N: 2}) || got.ETag != d.ETag {
		t.Fatalf("Get after Update = %+v, %v", got, err)
	}
	n := 0
	for d, err := range ps.List(ctx, "ptr") {
		if err != nil || d.Value == nil || d.Value.N != 2 {
			t.Fatalf("List yielded %+v, %v", d, err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("List yielded %d documents, want 1", n)
	}
	exactOrRefused(t, ps, "nil", nil, "nil")
	exactOrRefused(t, etagstore.New[int](s.Backend(), nil), "int", 42, "int")
	exactOrRefused(t, etagstore.New[[]string](s.Backend(), nil), "slice", []string{"a", "b"}, "[]string")
	exactOrRefused(t, etagstore.New[map[string]int](s.Backend(), nil), "map", map[string]int{"a": 1}, "map[string]int")
}
