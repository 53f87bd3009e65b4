package etagstore_test

import (
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// With the default options, an Update of a key this Store wrote sends one
// request, a write against the version it kept; a key another writer
// changes behind it is read first from then on (a stale copy costs a failed
// write once, not on every Update), until it has been left alone for two
// minutes.
func TestDefaultCacheOneRequestAndSharedKeys(t *testing.T) {
	ctx := t.Context()
	hb := &hookBackend{Backend: memstore.New(nil)}
	clock := newFakeClock()
	s := etagstore.New[counter](hb, &etagstore.Options{Clock: clock})
	if _, err := s.Create(ctx, "k", counter{}); err != nil {
		t.Fatal(err)
	}
	inc := func(c *counter) error { c.N++; return nil }
	update := func(wantReads, wantWrites int, what string) {
		t.Helper()
		hb.reads, hb.writes = 0, 0
		if _, err := s.Update(ctx, "k", inc); err != nil {
			t.Fatal(err)
		}
		if hb.reads != wantReads || hb.writes != wantWrites {
			t.Errorf("%s: %d reads, %d writes; want %d, %d", what, hb.reads, hb.writes, wantReads, wantWrites)
		}
	}
	update(0, 1, "an Update after Create")
	update(0, 1, "an Update after an Update")
	interfere(t, hb.Backend, "k")                         // another process
	update(1, 2, "the first Update after another writer") // a 412 on the kept copy, a read, a write
	interfere(t, hb.Backend, "k")
	update(1, 1, "a shared key's Update") // read first: no failed write
	update(1, 1, "a shared key's next Update")
	clock.now = clock.now.Add(2*time.Minute + time.Second)
	update(0, 1, "an Update two minutes after the key was last found shared")
	if d, err := s.Get(ctx, "k"); err != nil || d.Value.N != 206 {
		t.Fatalf("Get = %+v, %v; want N = 206", d.Value, err)
	}
}

// A negative CacheSize turns the cache off: every Update reads first.
func TestCacheOff(t *testing.T) {
	ctx := t.Context()
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[counter](hb, &etagstore.Options{CacheSize: -1})
	if _, err := s.Create(ctx, "k", counter{}); err != nil {
		t.Fatal(err)
	}
	hb.reads, hb.writes = 0, 0
	if _, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil }); err != nil {
		t.Fatal(err)
	}
	if hb.reads != 1 || hb.writes != 1 {
		t.Errorf("%d reads, %d writes; want 1, 1", hb.reads, hb.writes)
	}
}
