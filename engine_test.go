package etagstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// A grouped Update whose batch got a definite 412 (the write was not
// applied) and whose caller gives up during the backoff that follows
// returns its context's error: its mutation is in no write. The other
// member's Update goes on and lands once, without it.
func TestGroupedUpdateLeavingAfterDefiniteConflictIsCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		hb := &hookBackend{Backend: memstore.New(nil)}
		// No version cache: the batch reads, so its 412 is a lost race,
		// which backs off (a 412 of a write from a cached version reads
		// and writes again at once).
		s := etagstore.New[logDoc](hb, &etagstore.Options{CacheSize: -1})
		ctx := t.Context()
		if _, err := s.Create(ctx, "k", logDoc{}); err != nil { // write 1
			t.Fatal(err)
		}
		soloWrite := make(chan struct{})
		var refuse sync.Once
		hb.writeHook = func(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
			switch role(ctx) {
			case "solo": // the solo caller's write: held until the others have queued
				<-soloWrite
			case "L": // the batch's (L first) first write: refused, not applied
				refused := false
				refuse.Do(func() { refused = true })
				if refused {
					return "", etagstore.ErrConflict, true
				}
			}
			return "", nil, false
		}
		lctx, leave := context.WithCancel(as(ctx, "L"))
		var lerr, aerr error
		lDone := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Update(as(ctx, "solo"), "k", func(d *logDoc) error { d.Log = append(d.Log, "solo"); return nil }); err != nil {
				t.Errorf("solo: %v", err)
			}
		})
		synctest.Wait() // the solo caller is in its write
		wg.Go(func() {  // L queues first: the batch's requests carry its role
			defer close(lDone)
			_, lerr = s.Update(lctx, "k", func(d *logDoc) error { d.Log = append(d.Log, "L"); return nil })
		})
		synctest.Wait()
		wg.Go(func() {
			_, aerr = s.Update(ctx, "k", func(d *logDoc) error { d.Log = append(d.Log, "A"); return nil })
		})
		synctest.Wait() // L and A are queued behind it
		close(soloWrite)
		synctest.Wait() // the batch [L A] got its 412 and backs off
		if hb.writes != 3 {
			t.Fatalf("writes so far = %d, want 3 (create, solo, the refused batch)", hb.writes)
		}
		leave()
		<-lDone
		wg.Wait()
		if !errors.Is(lerr, context.Canceled) || errors.Is(lerr, etagstore.ErrOutcomeUnknown) {
			t.Errorf("L gave up after a definite 412: err = %v, want context.Canceled", lerr)
		}
		if aerr != nil {
			t.Errorf("A: %v", aerr)
		}
		d, err := s.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"solo", "A"}; !slices.Equal(d.Value.Log, want) {
			t.Errorf("stored %v, want %v", d.Value.Log, want)
		}
	})
}

// An unfenced Save keeps the fencing token a document recorded: a stale
// holder's later write is still refused.
func TestSaveKeepsTheFencingToken(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[logDoc](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "k", logDoc{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(etagstore.WithFence(ctx, 5), "k", func(d *logDoc) error { d.Log = append(d.Log, "holder 5"); return nil }); err != nil {
		t.Fatal(err)
	}
	base, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, base, logDoc{Log: []string{"holder 5", "saved"}}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(etagstore.WithFence(ctx, 3), "k", func(d *logDoc) error { d.Log = append(d.Log, "stale holder 3"); return nil })
	if !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("a stale holder's Update after a Save: err = %v, want ErrFenced", err)
	}
}

// A Save from a Doc a read returned writes on it at once, continuing its
// version's bookkeeping: one request, no read, and the fencing token kept.
func TestSaveFromAReadDocSendsOneRequest(t *testing.T) {
	ctx := t.Context()
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[logDoc](hb, nil)
	if _, err := s.Update(etagstore.WithFence(ctx, 5), "k", func(d *logDoc) error { d.Log = []string{"a"}; return nil }, etagstore.CreateIfMissing()); err != nil {
		t.Fatal(err)
	}
	base, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	reads, writes := hb.reads, hb.writes
	if _, err := s.Save(ctx, base, logDoc{Log: []string{"a", "b"}}, nil); err != nil {
		t.Fatal(err)
	}
	if hb.reads != reads || hb.writes != writes+1 {
		t.Errorf("Save sent %d reads and %d writes, want 0 and 1", hb.reads-reads, hb.writes-writes)
	}
	if _, err := s.Update(etagstore.WithFence(ctx, 3), "k", func(d *logDoc) error { return nil }); !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("a stale holder after the Save: %v, want ErrFenced", err)
	}
}
