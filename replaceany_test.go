package etagstore_test

// Replace with ETagAny of a Doc a read or write returned: the Doc's
// change applied onto the current version, and the fence rules it meets.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

type probeDoc struct {
	X int
	Y string
	Z string
}

type probeRoleKey struct{}

// stepGate holds the write of a context marked "solo" until gate closes.
type stepGate struct {
	driver.Backend
	gate chan struct{}
}

func (g *stepGate) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	if ctx.Value(probeRoleKey{}) == "solo" {
		<-g.gate
	}
	return g.Backend.Write(ctx, key, w)
}

// TestReplaceAnyOfSupersededUpdateDoc: two Updates share a group-commit
// batch (L sets X, A then sets Y). L's Doc holds L's state (X set, Y not
// yet) under a superseded ETag. Its caller changes Z and Replaces it with
// ETagAny: the caller's change (Z) is written onto the current version,
// and what others changed since the Doc's state (A's Y) stays.
func TestReplaceAnyOfSupersededUpdateDoc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer func() { synctest.Wait() }()
		g := &stepGate{Backend: memstore.New(nil), gate: make(chan struct{})}
		s := etagstore.New[probeDoc](g, nil)
		ctx := context.Background()
		if _, err := s.Create(ctx, "k", probeDoc{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Update(context.WithValue(ctx, probeRoleKey{}, "solo"), "k", func(d *probeDoc) error { d.Z = "solo"; return nil }); err != nil {
				t.Errorf("solo: %v", err)
			}
		})
		synctest.Wait() // the solo caller's write is held
		var ld, ad etagstore.Doc[probeDoc]
		var lerr, aerr error
		wg.Go(func() { ld, lerr = s.Update(ctx, "k", func(d *probeDoc) error { d.X = 1; return nil }) })
		synctest.Wait() // L queued
		wg.Go(func() { ad, aerr = s.Update(ctx, "k", func(d *probeDoc) error { d.Y = "A"; return nil }) })
		synctest.Wait() // A queued behind L
		close(g.gate)
		wg.Wait()
		if lerr != nil || aerr != nil {
			t.Fatalf("L: %v, A: %v", lerr, aerr)
		}
		if !ld.ETag.Superseded() || ad.ETag.Superseded() {
			t.Fatalf("L and A did not share a batch (L %q, A %q)", ld.ETag, ad.ETag)
		}
		if ld.Value != (probeDoc{X: 1, Z: "solo"}) {
			t.Fatalf("L's Doc holds %+v, want L's own state", ld.Value)
		}
		d := ld
		d.ETag = etagstore.ETagAny
		d.Value.Z = "mine"
		if _, err := s.Replace(ctx, d); err != nil {
			t.Fatalf("Replace(ETagAny) of L's Doc: %v", err)
		}
		got, err := s.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		want := probeDoc{X: 1, Y: "A", Z: "mine"} // A's Y stays: it was changed by another since L's state
		if diff := cmp.Diff(want, got.Value); diff != "" {
			t.Errorf("after Replace(ETagAny) of a superseded Update Doc (-want +got):\n%s", diff)
		}
	})
}

// TestUnfencedReplaceAnyOfReadDocForgetsToken: an unfenced Replace starts
// a new history and forgets the recorded token (fence.go), whether the
// Doc was built by hand, carries an explicit ETag, or is a read Doc
// replaced with ETagAny (which reads first).
func TestUnfencedReplaceAnyOfReadDocForgetsToken(t *testing.T) {
	ctx := t.Context()
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	for _, tc := range []struct {
		name string
		doc  func(s *etagstore.Store[probeDoc], key string) etagstore.Doc[probeDoc]
	}{
		{"explicit ETag", func(s *etagstore.Store[probeDoc], key string) etagstore.Doc[probeDoc] {
			d, err := s.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}},
		{"built by hand, ETagAny", func(s *etagstore.Store[probeDoc], key string) etagstore.Doc[probeDoc] {
			return etagstore.Doc[probeDoc]{Key: key, ETag: etagstore.ETagAny}
		}},
		{"read, ETagAny", func(s *etagstore.Store[probeDoc], key string) etagstore.Doc[probeDoc] {
			d, err := s.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			d.ETag = etagstore.ETagAny
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := etagstore.New[probeDoc](memstore.New(nil), nil)
			if _, err := s.Create(at(10), "k", probeDoc{}); err != nil {
				t.Fatal(err)
			}
			d := tc.doc(s, "k")
			d.Value.Y = "unfenced"
			if _, err := s.Replace(ctx, d); err != nil { // unfenced: a new history, the token forgotten
				t.Fatal(err)
			}
			if _, err := s.Update(at(5), "k", func(d *probeDoc) error { d.X++; return nil }); err != nil {
				t.Errorf("fenced Update with token 5 after an unfenced Replace (%s) = %v, want nil (the token was forgotten)", tc.name, err)
				if !errors.Is(err, etagstore.ErrFenced) {
					t.Errorf("and the error is not even ErrFenced")
				}
			}
		})
	}
}

// TestNonPositiveTokenRefused: tokens are positive (fence.go): a write
// fenced with 0 or less is refused with ErrInvalidInput before anything
// is sent, a create over a key a fenced Delete buried included.
func TestNonPositiveTokenRefused(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[probeDoc](memstore.New(nil), nil)
	if _, err := s.Create(etagstore.WithFence(ctx, 7), "k", probeDoc{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(etagstore.WithFence(ctx, 7), "k", etagstore.ETagAny); err != nil {
		t.Fatal(err)
	}
	for _, token := range []int64{0, -1} {
		at := etagstore.WithFence(ctx, token)
		calls := map[string]error{}
		_, calls["Create"] = s.Create(at, "k", probeDoc{Y: "stale"})
		_, calls["Update"] = s.Update(at, "k", func(d *probeDoc) error { d.X++; return nil }, etagstore.CreateIfMissing())
		calls["Delete"] = s.Delete(at, "other", etagstore.ETagAny)
		_, calls["Transact"] = s.Transact(at, func(tx *etagstore.Tx[probeDoc]) error { return tx.Put("k", probeDoc{}) })
		for op, err := range calls {
			if !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("%s fenced with token %d = %v, want ErrInvalidInput (tokens are positive)", op, token, err)
			}
		}
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("after the refused writes: %v, want ErrNotFound", err)
	}
}

type mapDoc struct{ M map[string]int }

// TestConcurrentReplaceAnyOfOneRead: writers holding the same read
// Doc each add their own member and Replace with ETagAny at once (a start
// gate): each change is applied onto the version current when it writes,
// so every member ends stored.
func TestConcurrentReplaceAnyOfOneRead(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[mapDoc](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "k", mapDoc{M: map[string]int{"base": 1}}); err != nil {
		t.Fatal(err)
	}
	read, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	const writers = 16
	for i := range writers {
		wg.Go(func() {
			<-start
			d := read
			d.Value.M = map[string]int{"base": 1, string(rune('a' + i)): i + 1}
			d.ETag = etagstore.ETagAny
			if _, err := s.Replace(ctx, d); err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	got, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Value.M) != writers+1 {
		t.Errorf("after %d concurrent Replace(ETagAny) of one read, each adding a member: %v", writers, got.Value.M)
	}
}

// TestCachedCopyOfBuriedKey: a Store whose version cache holds a
// key that another Store then deletes under a newer fence: every call of
// the first Store sees the key missing, and its stale-token create (from
// the cached copy, by Update with CreateIfMissing) is refused.
func TestCachedCopyOfBuriedKey(t *testing.T) {
	ctx := t.Context()
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	b := memstore.New(nil)
	cached := etagstore.New[probeDoc](b, &etagstore.Options{CacheSize: 16})
	other := etagstore.New[probeDoc](b, nil)
	if _, err := cached.Create(at(3), "k", probeDoc{Y: "3's"}); err != nil {
		t.Fatal(err)
	}
	read, err := cached.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(at(7), "k", etagstore.ETagAny); err != nil {
		t.Fatal(err)
	}
	if _, err := cached.Update(at(5), "k", func(d *probeDoc) error { d.X = 5; return nil }, etagstore.CreateIfMissing()); !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("Update(CreateIfMissing, 5) from a cached copy of a key buried under 7 = %v, want ErrFenced", err)
	}
	if _, err := cached.Update(at(9), "k", func(d *probeDoc) error { d.X = 9; return nil }); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Update(9) without CreateIfMissing = %v, want ErrNotFound", err)
	}
	d := read
	d.ETag = etagstore.ETagAny
	if _, err := cached.Replace(ctx, d); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Replace(ETagAny) of the cached read = %v, want ErrNotFound", err)
	}
	if _, err := cached.Replace(ctx, read); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Replace of the cached read's ETag = %v, want ErrNotFound", err)
	}
	if _, err := cached.Get(ctx, "k"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
}

type newerDoc struct {
	Title string
	A, B  string
	In    struct{ P, Q string }
}

type olderDoc struct {
	Title string
	In    struct{ P string }
}

// TestReplaceAnyWithout: a Doc of an older type read from a newer
// one's document, with one unknown member dropped (Extra.Without) and a
// field changed, is replaced with ETagAny after the newer type changed
// another unknown member, an unknown nested member and a known field: the
// drop and the change are applied, and the newer writer's changes stay.
func TestReplaceAnyWithout(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	newer := etagstore.New[newerDoc](b, nil)
	older := etagstore.New[olderDoc](b, nil)
	start := newerDoc{Title: "t", A: "a", B: "b"}
	start.In.P, start.In.Q = "p", "q"
	if _, err := newer.Create(ctx, "k", start); err != nil {
		t.Fatal(err)
	}
	d, err := older.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newer.Update(ctx, "k", func(n *newerDoc) error { n.B, n.In.Q, n.Title = "b2", "q2", "t2"; return nil }); err != nil {
		t.Fatal(err)
	}
	d.Extra = d.Extra.Without("A")
	d.Value.In.P = "p3"
	d.ETag = etagstore.ETagAny
	if _, err := older.Replace(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := newer.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	want := newerDoc{Title: "t2", B: "b2"}
	want.In.P, want.In.Q = "p3", "q2"
	if diff := cmp.Diff(want, got.Value); diff != "" {
		t.Errorf("after Replace(ETagAny) of a read Doc with Without(A) (-want +got):\n%s", diff)
	}
}
