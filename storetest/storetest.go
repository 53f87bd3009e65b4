// Package storetest is the conformance suite every driver.Backend passes.
//
// A backend's test file is a harness and one call:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) driver.Backend { return newEmptyBackend(t) })
//	}
//
// The suite checks every rule of the design's rules table through the typed
// Store, by error class (errors.Is), never by message; the concurrency cases
// race many goroutines and check exact results and linearizability.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// NewBackend returns an empty backend for one test; it registers its own
// clean-up with t.Cleanup.
type NewBackend func(t *testing.T) driver.Backend

// Page is the document type of the suite. Its fields map onto every
// backend's encoding (JSON, typed table properties).
type Page struct {
	Title string
	Body  string
	N     int64
}

// Run runs the conformance suite against the backends made by newBackend.
func Run(t *testing.T, newBackend NewBackend) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s *etagstore.Store[Page])
	}{
		{"GetMissing", testGetMissing},
		{"Create", testCreate},
		{"Replace", testReplace},
		{"ReplaceStale", testReplaceStale},
		{"ReplaceWithoutETag", testReplaceWithoutETag},
		{"ReplaceAny", testReplaceAny},
		{"ReplaceMissing", testReplaceMissing},
		{"Upsert", testUpsert},
		{"Delete", testDelete},
		{"Update", testUpdate},
		{"UpdateAbort", testUpdateAbort},
		{"UpdateNoop", testUpdateNoop},
		{"UpdateMissing", testUpdateMissing},
		{"UpdateCreateIfMissing", testUpdateCreateIfMissing},
		{"InvalidKey", testInvalidKey},
		{"TooLarge", testTooLarge},
		{"List", testList},
		{"Save", testSave},
		{"ConcurrentUpdate", testConcurrentUpdate},
		{"ConcurrentCreate", testConcurrentCreate},
		{"ThreeStoresOneKey", testThreeStoresOneKey},
		{"StaleReplaceAfterUpdate", testStaleReplaceAfterUpdate},
		{"Linearizable", testLinearizable},
		{"Fencing", testFencing},
		{"FenceAfterDelete", testFenceAfterDelete},
		{"FenceAfterDeleteRacing", testFenceAfterDeleteRacing},
		{"GroupCommit", testGroupCommit},
		{"IDAllocator", testIDAllocator},
		{"SupersededETag", testSupersededETag},
		{"NestedUpdate", testNestedUpdate},
		{"PanickingMutate", testPanickingMutate},
		{"BlockedMutate", testBlockedMutate},
		{"OwnFailure", testOwnFailure},
		{"OneSentinel", testOneSentinel},
		{"MalformedETag", testMalformedETag},
		{"ListUnicodeOrder", testListUnicodeOrder},
		{"InvalidUTF8", testInvalidUTF8},
		{"NonFiniteFloat", testNonFiniteFloat},
		{"TimeRange", testTimeRange},
		{"DocumentTypes", testDocumentTypes},
	}
	tests = append(tests, transactCases...)
	// Every case runs on the default Store (version cache on: an Update's
	// first write goes against the version kept), on one without the cache
	// (every Update reads first), and on a backend behind a pass-through
	// wrapper (abilities must survive it).
	for _, cfg := range []struct {
		name string
		opts etagstore.Options
		wrap bool
	}{
		{"Default", etagstore.Options{}, false},
		{"NoCache", etagstore.Options{CacheSize: -1}, false},
		{"Wrapped", etagstore.Options{CacheSize: 64}, true},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					opts := cfg.opts
					b := newBackend(t)
					if cfg.wrap {
						want := b.Abilities()
						b = Wrap(b)
						if got := b.Abilities(); got.Verbatim != want.Verbatim || (got.Codec == nil) != (want.Codec == nil) || (got.ReadIfChanged == nil) != (want.ReadIfChanged == nil) ||
							got.Merge != want.Merge || got.MaxKeyLen != want.MaxKeyLen || (got.Commit == nil) != (want.Commit == nil) || (got.CheckCommit == nil) != (want.CheckCommit == nil) || (got.CompareKeys == nil) != (want.CompareKeys == nil) ||
							(got.ReadMany == nil) != (want.ReadMany == nil) || (got.Entries == nil) != (want.Entries == nil) ||
							(got.VersionsBetween == nil) != (want.VersionsBetween == nil) {
							t.Fatalf("abilities lost to a wrapper: %+v, want %+v", got, want)
						}
					}
					tc.fn(t, etagstore.New[Page](b, withErrorLines(t, opts)))
				})
			}
		})
	}
	// ReadMany reads items, not documents: its group runs once, on the
	// backend itself.
	t.Run("ReadMany", func(t *testing.T) { runReadMany(t, newBackend) })
	// So does the listing of versions (driver.Abilities.VersionsBetween).
	t.Run("VersionsBetween", func(t *testing.T) { runVersionsBetween(t, newBackend) })
	// So do index entries (driver.Abilities.Entries): on the backend itself.
	t.Run("Entries", func(t *testing.T) { RunEntries(t, newBackend) })
	// A Store's indexes, through Stores of their own document type.
	t.Run("Indexes", func(t *testing.T) { RunIndexes(t, newBackend) })
}

// testGroupCommit: concurrent Updates of one key, committed in shared
// writes, each return a version holding their own mutation; every
// mutation lands exactly once; a failing mutation fails only its caller.
func testGroupCommit(t *testing.T, s *etagstore.Store[Page]) {
	const writers, each = 12, 15
	ctx := t.Context()
	boom := errors.New("refused")
	var wg sync.WaitGroup
	var refused, reruns atomic.Int64
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				token := fmt.Sprintf("[%d.%d]", w, i)
				calls := 0
				d, err := s.Update(ctx, "log", func(p *Page) error {
					calls++
					if i%5 == 4 {
						p.Body += "never" // must leave no trace
						return boom
					}
					p.Body += token
					p.N++
					return nil
				}, etagstore.CreateIfMissing())
				if calls < 1 {
					t.Errorf("Update %s never ran its mutation", token)
				}
				// One Store is the only writer here, so its batches race
				// only a caller left to write on its own because its mutate
				// outlasted the turn timeout (a loaded machine): re-runs are
				// allowed by Update's contract, and counted.
				reruns.Add(int64(calls - 1))
				switch {
				case i%5 == 4:
					if !errors.Is(err, boom) {
						t.Errorf("failing mutation: Update = %v, want its own error", err)
					}
					refused.Add(1)
				case err != nil:
					t.Errorf("Update: %v", err)
				case !strings.Contains(d.Value.Body, token):
					t.Errorf("Update %s returned a version without its mutation: %q", token, d.Value.Body)
				}
			}
		})
	}
	wg.Wait()
	d, err := s.Get(ctx, "log")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d mutations ran again after a lost race", reruns.Load())
	applied := int64(writers*each) - refused.Load()
	if d.Value.N != applied || strings.Contains(d.Value.Body, "never") {
		t.Fatalf("N = %d (want %d), body has a refused mutation: %v", d.Value.N, applied, strings.Contains(d.Value.Body, "never"))
	}
	for w := range writers {
		for i := range each {
			token := fmt.Sprintf("[%d.%d]", w, i)
			if n := strings.Count(d.Value.Body, token); n != 1 && i%5 != 4 {
				t.Fatalf("%s appears %d times", token, n)
			}
		}
	}
}

// ignoreETag compares documents without their ETags.
var ignoreETag = cmpopts.IgnoreFields(etagstore.Doc[Page]{}, "ETag")

func mustCreate(t *testing.T, s *etagstore.Store[Page], key string, p Page) etagstore.Doc[Page] {
	t.Helper()
	d, err := s.Create(t.Context(), key, p)
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	if d.ETag == "" {
		t.Fatalf("Create(%q) returned an empty ETag", key)
	}
	return d
}

// wantStored checks what Get returns for key, ETag included.
func wantStored(t *testing.T, s *etagstore.Store[Page], want etagstore.Doc[Page]) {
	t.Helper()
	got, err := s.Get(t.Context(), want.Key)
	if err != nil {
		t.Fatalf("Get(%q): %v", want.Key, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored %q (-want +got):\n%s", want.Key, diff)
	}
}

func wantMissing(t *testing.T, s *etagstore.Store[Page], key string) {
	t.Helper()
	if _, err := s.Get(t.Context(), key); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Get(%q) = %v, want ErrNotFound", key, err)
	}
}

func wantConflict(t *testing.T, err error, theirs etagstore.Doc[Page]) *etagstore.ConflictError[Page] {
	t.Helper()
	if !errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	var ce *etagstore.ConflictError[Page]
	if !errors.As(err, &ce) {
		t.Fatalf("err = %T %v, want *ConflictError[Page]", err, err)
	}
	if diff := cmp.Diff(theirs, ce.Theirs); diff != "" {
		t.Errorf("ConflictError.Theirs (-want +got):\n%s", diff)
	}
	return ce
}

func testGetMissing(t *testing.T, s *etagstore.Store[Page]) {
	wantMissing(t, s, "nobody")
}

func testCreate(t *testing.T, s *etagstore.Store[Page]) {
	d := mustCreate(t, s, "p1", Page{Title: "one", Body: "text", N: 1})
	wantStored(t, s, d)
	_, err := s.Create(t.Context(), "p1", Page{Title: "other"})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
	wantStored(t, s, d)
}

func testReplace(t *testing.T, s *etagstore.Store[Page]) {
	d := mustCreate(t, s, "p", Page{Title: "v1"})
	d.Value.Title = "v2"
	d2, err := s.Replace(t.Context(), d)
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if d2.ETag == "" || d2.ETag == d.ETag {
		t.Fatalf("Replace returned ETag %q, want a new one (old %q)", d2.ETag, d.ETag)
	}
	wantStored(t, s, d2)
}

func testReplaceStale(t *testing.T, s *etagstore.Store[Page]) {
	old := mustCreate(t, s, "p", Page{Title: "v1"})
	cur := old
	cur.Value.Title = "v2"
	cur, err := s.Replace(t.Context(), cur)
	if err != nil {
		t.Fatal(err)
	}
	old.Value.Title = "stale"
	_, err = s.Replace(t.Context(), old)
	ce := wantConflict(t, err, cur)
	if ce.ETag != old.ETag || ce.Mine.Title != "stale" || ce.Key != "p" {
		t.Errorf("ConflictError = %+v, want ETag %s and Mine.Title stale", ce, old.ETag)
	}
	if ce.Diff() == "" {
		t.Error("ConflictError.Diff() is empty for different values")
	}
	wantStored(t, s, cur)
}

func testReplaceWithoutETag(t *testing.T, s *etagstore.Store[Page]) {
	d := mustCreate(t, s, "p", Page{Title: "v1"})
	_, err := s.Replace(t.Context(), etagstore.Doc[Page]{Key: "p", Value: Page{Title: "blind"}})
	if !errors.Is(err, etagstore.ErrETagRequired) {
		t.Fatalf("Replace without ETag = %v, want ErrETagRequired", err)
	}
	wantStored(t, s, d)
	// The same rule holds at the Backend contract: no condition, no write.
	_, err = s.Backend().Write(t.Context(), "p", driver.Write{Data: []byte("{}"), Cond: driver.Cond{Kind: driver.CondIfMatch}})
	if !errors.Is(err, etagstore.ErrETagRequired) {
		t.Fatalf("Backend.Write(IfMatch \"\") = %v, want ErrETagRequired", err)
	}
	wantStored(t, s, d)
}

func testReplaceAny(t *testing.T, s *etagstore.Store[Page]) {
	mustCreate(t, s, "p", Page{Title: "v1"})
	d, err := s.Replace(t.Context(), etagstore.Doc[Page]{Key: "p", Value: Page{Title: "forced"}, ETag: etagstore.ETagAny})
	if err != nil {
		t.Fatalf("Replace(ETagAny): %v", err)
	}
	wantStored(t, s, d)
}

func testReplaceMissing(t *testing.T, s *etagstore.Store[Page]) {
	d := mustCreate(t, s, "p", Page{Title: "v1"})
	if err := s.Delete(t.Context(), "p", d.ETag); err != nil {
		t.Fatal(err)
	}
	for _, etag := range []etagstore.ETag{d.ETag, etagstore.ETagAny} {
		_, err := s.Replace(t.Context(), etagstore.Doc[Page]{Key: "p", Value: Page{Title: "ghost"}, ETag: etag})
		if !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("Replace(deleted, %s) = %v, want ErrNotFound", etag, err)
		}
	}
	wantMissing(t, s, "p")
}

func testUpsert(t *testing.T, s *etagstore.Store[Page]) {
	d1, err := s.Upsert(t.Context(), "p", Page{Title: "first"})
	if err != nil {
		t.Fatalf("Upsert(missing): %v", err)
	}
	wantStored(t, s, d1)
	d2, err := s.Upsert(t.Context(), "p", Page{Title: "second"})
	if err != nil {
		t.Fatalf("Upsert(existing): %v", err)
	}
	if d2.ETag == d1.ETag {
		t.Errorf("Upsert kept ETag %s", d1.ETag)
	}
	wantStored(t, s, d2)
}

func testDelete(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	old := mustCreate(t, s, "p", Page{Title: "v1"})
	if err := s.Delete(ctx, "p", ""); !errors.Is(err, etagstore.ErrETagRequired) {
		t.Fatalf("Delete without ETag = %v, want ErrETagRequired", err)
	}
	cur, err := s.Update(ctx, "p", func(p *Page) error { p.Title = "v2"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	wantConflict(t, s.Delete(ctx, "p", old.ETag), cur)
	wantStored(t, s, cur)
	if err := s.Delete(ctx, "p", cur.ETag); err != nil {
		t.Fatalf("Delete(current ETag): %v", err)
	}
	wantMissing(t, s, "p")
	if err := s.Delete(ctx, "p", cur.ETag); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Delete(missing) = %v, want ErrNotFound", err)
	}
	mustCreate(t, s, "q", Page{Title: "x"})
	if err := s.Delete(ctx, "q", etagstore.ETagAny); err != nil {
		t.Fatalf("Delete(ETagAny): %v", err)
	}
	wantMissing(t, s, "q")
	if err := s.Delete(ctx, "q", etagstore.ETagAny); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Delete(missing, ETagAny) = %v, want ErrNotFound", err)
	}
}

func testUpdate(t *testing.T, s *etagstore.Store[Page]) {
	d := mustCreate(t, s, "p", Page{Title: "t", N: 1})
	got, err := s.Update(t.Context(), "p", func(p *Page) error { p.N += 41; return nil })
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	want := etagstore.Doc[Page]{Key: "p", Value: Page{Title: "t", N: 42}}
	if diff := cmp.Diff(want, got, ignoreETag); diff != "" {
		t.Errorf("Update result (-want +got):\n%s", diff)
	}
	if got.ETag == d.ETag || got.ETag == "" {
		t.Errorf("Update returned ETag %q, want a new one", got.ETag)
	}
	wantStored(t, s, got)
}

func testUpdateAbort(t *testing.T, s *etagstore.Store[Page]) {
	d := mustCreate(t, s, "p", Page{N: 1})
	boom := errors.New("boom")
	_, err := s.Update(t.Context(), "p", func(p *Page) error { p.N = 99; return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want the mutate error", err)
	}
	wantStored(t, s, d)
}

func testUpdateNoop(t *testing.T, s *etagstore.Store[Page]) {
	d := mustCreate(t, s, "p", Page{N: 1})
	got, err := s.Update(t.Context(), "p", func(p *Page) error { p.N = 1; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("no-op Update (-want +got):\n%s", diff)
	}
	wantStored(t, s, d) // same ETag: nothing was written
}

func testUpdateMissing(t *testing.T, s *etagstore.Store[Page]) {
	called := false
	_, err := s.Update(t.Context(), "p", func(p *Page) error { called = true; return nil })
	if !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Update(missing) = %v, want ErrNotFound", err)
	}
	if called {
		t.Error("mutate ran for a missing document")
	}
	wantMissing(t, s, "p")
}

func testUpdateCreateIfMissing(t *testing.T, s *etagstore.Store[Page]) {
	inc := func(p *Page) error { p.N++; return nil }
	d, err := s.Update(t.Context(), "p", inc, etagstore.CreateIfMissing())
	if err != nil {
		t.Fatal(err)
	}
	if d.Value.N != 1 {
		t.Fatalf("created N = %d, want 1", d.Value.N)
	}
	d, err = s.Update(t.Context(), "p", inc, etagstore.CreateIfMissing())
	if err != nil {
		t.Fatal(err)
	}
	if d.Value.N != 2 {
		t.Fatalf("updated N = %d, want 2", d.Value.N)
	}
	wantStored(t, s, d)
	// A mutation that changes nothing still creates a missing key: the
	// zero T, as stored by the create that is the write.
	z, err := s.Update(t.Context(), "zero", func(*Page) error { return nil }, etagstore.CreateIfMissing())
	if err != nil || z.Value != (Page{}) || z.ETag == "" {
		t.Fatalf("Update(missing, no change, CreateIfMissing) = %+v, %v; want the zero Page created", z, err)
	}
	wantStored(t, s, z)
}

func testInvalidKey(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	for _, key := range []string{"", "bad\x00key", "tab\tkey", "del\x7fkey", "c1\u0085key", "bad\xffutf8"} {
		calls := map[string]error{}
		_, calls["Get"] = s.Get(ctx, key)
		_, calls["Create"] = s.Create(ctx, key, Page{})
		_, calls["Upsert"] = s.Upsert(ctx, key, Page{})
		_, calls["Replace"] = s.Replace(ctx, etagstore.Doc[Page]{Key: key, ETag: etagstore.ETagAny})
		_, calls["Update"] = s.Update(ctx, key, func(*Page) error { return nil }, etagstore.CreateIfMissing())
		calls["Delete"] = s.Delete(ctx, key, etagstore.ETagAny)
		for op, err := range calls {
			if !errors.Is(err, etagstore.ErrInvalidKey) {
				t.Errorf("%s(%q) = %v, want ErrInvalidKey", op, key, err)
			}
		}
	}
	for d, err := range s.List(ctx, "") {
		t.Errorf("List after invalid keys yielded %q, %v; want nothing", d.Key, err)
	}
}

func testTooLarge(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	big := Page{Body: strings.Repeat("x", 8<<20)}
	if _, err := s.Create(ctx, "big", big); !errors.Is(err, etagstore.ErrTooLarge) {
		t.Fatalf("Create(8 MiB) = %v, want ErrTooLarge", err)
	}
	wantMissing(t, s, "big")
	d := mustCreate(t, s, "p", Page{Body: "small"})
	_, err := s.Update(ctx, "p", func(p *Page) error { p.Body = big.Body; return nil })
	if !errors.Is(err, etagstore.ErrTooLarge) {
		t.Fatalf("Update to 8 MiB = %v, want ErrTooLarge", err)
	}
	wantStored(t, s, d)
}

func testList(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	keys := []string{"b-2", "a-3", "b-1", "a-1", "c-1", "a-2", "b-10"}
	for i, k := range keys {
		mustCreate(t, s, k, Page{Title: k, N: int64(i)})
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a-1", "a-2", "a-3", "b-1", "b-10", "b-2", "c-1"}},
		{"b-", []string{"b-1", "b-10", "b-2"}},
		{"b-1", []string{"b-1", "b-10"}},
		{"z", nil},
	} {
		var got []string
		for d, err := range s.List(ctx, tc.prefix) {
			if err != nil {
				t.Fatalf("List(%q): %v", tc.prefix, err)
			}
			if d.Value.Title != d.Key || d.ETag == "" {
				t.Errorf("List(%q) yielded %+v, want Title == Key and an ETag", tc.prefix, d)
			}
			got = append(got, d.Key)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("List(%q) keys (-want +got):\n%s", tc.prefix, diff)
		}
	}
	n := 0
	for range s.List(ctx, "") {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("breaking out of List after 2 gave %d", n)
	}
}

func testSave(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	base := mustCreate(t, s, "p", Page{Title: "title", Body: "body", N: 1})

	// Disjoint edits: mine changes Body, theirs changes Title; both kept.
	theirs, err := s.Update(ctx, "p", func(p *Page) error { p.Title = "their title"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	mine := base.Value
	mine.Body = "my body"
	saved, err := s.Save(ctx, base, mine, nil)
	if err != nil {
		t.Fatalf("Save with disjoint edits: %v", err)
	}
	want := etagstore.Doc[Page]{Key: "p", Value: Page{Title: "their title", Body: "my body", N: 1}}
	if diff := cmp.Diff(want, saved, ignoreETag); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	wantStored(t, s, saved)
	_ = theirs

	// Overlapping edits: both change Body; nothing is written and the error
	// holds all three versions.
	base = saved
	theirs, err = s.Update(ctx, "p", func(p *Page) error { p.Body = "their body"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	mine = base.Value
	mine.Body = "my other body"
	_, err = s.Save(ctx, base, mine, nil)
	ce := wantConflict(t, err, theirs)
	if diff := cmp.Diff([]string{"Body"}, ce.Fields); diff != "" {
		t.Errorf("conflicting fields (-want +got):\n%s", diff)
	}
	if ce.Base != base.Value || ce.Mine != mine {
		t.Errorf("ConflictError Base/Mine = %+v / %+v, want %+v / %+v", ce.Base, ce.Mine, base.Value, mine)
	}
	wantStored(t, s, theirs)

	// Save from the current version is a plain conditional write.
	mine = theirs.Value
	mine.N = 7
	saved, err = s.Save(ctx, theirs, mine, nil)
	if err != nil || saved.Value != mine {
		t.Fatalf("Save(current) = %+v, %v", saved, err)
	}
	if _, err := s.Save(ctx, etagstore.Doc[Page]{Key: "p", Value: mine}, mine, nil); !errors.Is(err, etagstore.ErrETagRequired) {
		t.Fatalf("Save without ETag = %v, want ErrETagRequired", err)
	}
}

// testConcurrentUpdate: 16 goroutines × 100 increments on one key end exact.
func testConcurrentUpdate(t *testing.T, s *etagstore.Store[Page]) {
	const writers, each = 16, 100
	ctx := t.Context()
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for range writers {
		wg.Go(func() {
			for range each {
				_, err := s.Update(ctx, "counter", func(p *Page) error { p.N++; return nil }, etagstore.CreateIfMissing())
				if err != nil {
					failed.Add(1)
					t.Errorf("Update: %v", err)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	d, err := s.Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	if d.Value.N != writers*each || ok.Load() != writers*each {
		t.Fatalf("counter = %d after %d successful and %d failed Updates, want %d", d.Value.N, ok.Load(), failed.Load(), writers*each)
	}
}

// testConcurrentCreate: 16 racing creators, exactly one wins.
func testConcurrentCreate(t *testing.T, s *etagstore.Store[Page]) {
	const racers = 16
	ctx := t.Context()
	var wg sync.WaitGroup
	var won, exists atomic.Int64
	var winner atomic.Int64
	for i := range racers {
		wg.Go(func() {
			_, err := s.Create(ctx, "once", Page{N: int64(i)})
			switch {
			case err == nil:
				won.Add(1)
				winner.Store(int64(i))
			case errors.Is(err, etagstore.ErrExists):
				exists.Add(1)
			default:
				t.Errorf("Create: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || exists.Load() != racers-1 {
		t.Fatalf("%d creates won and %d got ErrExists, want 1 and %d", won.Load(), exists.Load(), racers-1)
	}
	d, err := s.Get(ctx, "once")
	if err != nil {
		t.Fatal(err)
	}
	if d.Value.N != winner.Load() {
		t.Fatalf("stored N = %d, want the winner's %d", d.Value.N, winner.Load())
	}
}

// testStaleReplaceAfterUpdate: a Replace holding a version that concurrent
// Updates have moved past gets a ConflictError whose Theirs is what is stored.
func testStaleReplaceAfterUpdate(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	held := mustCreate(t, s, "p", Page{Title: "start"})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := s.Update(ctx, "p", func(p *Page) error { p.N++; p.Title = fmt.Sprint("by ", i); return nil }); err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	wg.Wait()
	stored, err := s.Get(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	held.Value.Title = "mine"
	_, err = s.Replace(ctx, held)
	ce := wantConflict(t, err, stored)
	if ce.Theirs.Value.N != 4 {
		t.Errorf("Theirs.N = %d, want 4", ce.Theirs.Value.N)
	}
	wantStored(t, s, stored)
}

// testFencing: a document records the highest fencing token written to it;
// a write carrying a lower one is refused with ErrFenced and writes nothing.
func testFencing(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	d, err := s.Create(at(5), "p", Page{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	inc := func(p *Page) error { p.N++; return nil }
	old := at(4)
	checks := map[string]error{}
	_, checks["Update"] = s.Update(old, "p", inc)
	_, checks["Replace"] = s.Replace(old, etagstore.Doc[Page]{Key: "p", Value: Page{N: 9}, ETag: d.ETag})
	_, checks["Replace(ETagAny)"] = s.Replace(old, etagstore.Doc[Page]{Key: "p", Value: Page{N: 9}, ETag: etagstore.ETagAny})
	_, checks["Save"] = s.Save(old, d, Page{N: 9}, nil)
	checks["Delete"] = s.Delete(old, "p", d.ETag)
	for op, err := range checks {
		if !errors.Is(err, etagstore.ErrFenced) {
			t.Errorf("%s with token 4 after 5 = %v, want ErrFenced", op, err)
		}
	}
	wantStored(t, s, d)
	if _, err := s.Upsert(at(9), "p", Page{}); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("fenced Upsert = %v, want ErrInvalidInput", err)
	}
	wantStored(t, s, d)

	// The same token, and then a newer one, may write; the newer one fences
	// the older from then on.
	if _, err := s.Update(at(5), "p", inc); err != nil {
		t.Fatalf("Update with the recorded token: %v", err)
	}
	d6, err := s.Update(at(6), "p", inc)
	if err != nil {
		t.Fatalf("Update with a newer token: %v", err)
	}
	if _, err := s.Update(at(5), "p", inc); !errors.Is(err, etagstore.ErrFenced) {
		t.Fatalf("Update with token 5 after 6 = %v, want ErrFenced", err)
	}
	// Unfenced writes leave the record in place for Update.
	d7, err := s.Update(ctx, "p", inc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(at(5), "p", inc); !errors.Is(err, etagstore.ErrFenced) {
		t.Fatalf("Update with token 5 after an unfenced Update = %v, want ErrFenced", err)
	}
	if d7.Value.N != d6.Value.N+1 {
		t.Fatalf("N = %d, want %d", d7.Value.N, d6.Value.N+1)
	}
	if err := s.Delete(at(6), "p", d7.ETag); err != nil {
		t.Fatalf("Delete with the current token: %v", err)
	}
	wantMissing(t, s, "p")
}

// Wrap returns b behind a pass-through wrapper, as a user's logging or
// metrics wrapper would put it: a struct embedding the Backend. The suite
// runs every case through it, and backends' tests run their extras
// (queries, merges, conditional reads) through it, so no ability depends
// on the concrete type.
func Wrap(b driver.Backend) driver.Backend { return passthrough{b} }

type passthrough struct{ driver.Backend }
