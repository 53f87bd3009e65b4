package etagstore_test

// Shared reads, the version cache and the values callers hold: a Get never
// waits on other callers' work (a batch's backoff, a stalled read), and
// what one caller holds never changes under another.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// A Get of a key whose group-commit batch keeps losing races must not wait
// out the batch's retries (up to 250 ms of backoff each, 15 s in all by
// default): a Get reads on its own terms, never behind a batch's write.
// Here another process writes before each of the batch's writes (all ten
// attempts); from the second refusal on they are lost races, so the batch
// pauses. The Get must be answered during a pause, not when the batch
// gives up (~0.5 s of backoff later).
func TestGetDoesNotWaitOutBatchBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		ctx := t.Context()
		readGate, writeGate := make(chan struct{}), make(chan struct{})
		hb := &hookBackend{Backend: memstore.New(nil)}
		hb.afterRead = func(ctx context.Context, _ string, _ driver.Item, _ error) {
			if role(ctx) == "held" {
				<-readGate
			}
		}
		foreign := 0
		hb.writeHook = func(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
			switch role(ctx) {
			case "solo": // the solo Update's write
				<-writeGate
			case "batch": // every write of the batch: another process wrote first
				foreign++
				data, _ := etagstore.JSON.Marshal(counter{N: 100 * foreign})
				if _, err := hb.Backend.Write(ctx, key, driver.Write{Data: data}); err != nil {
					t.Error(err)
				}
			}
			return "", nil, false
		}
		s := etagstore.New[counter](hb, nil)
		if _, err := s.Create(ctx, "k", counter{}); err != nil { // write 1
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = s.Get(as(ctx, "held"), "k") }) // its read is held
		synctest.Wait()
		inc := func(c *counter) error { c.N++; return nil }
		wg.Go(func() { _, _ = s.Update(as(ctx, "solo"), "k", inc) }) // solo: its write is held
		synctest.Wait()
		start := time.Now()
		var tookMu sync.Mutex
		took := time.Duration(-1)
		getDone := make(chan struct{})
		wg.Go(func() { // waits behind read 1
			defer close(getDone)
			if _, err := s.Get(ctx, "k"); err != nil {
				t.Error(err)
			}
			tookMu.Lock()
			took = time.Since(start)
			tookMu.Unlock()
		})
		synctest.Wait()
		for range 2 { // one batch behind the solo Update: every write of it refused
			wg.Go(func() { _, _ = s.Update(as(ctx, "batch"), "k", inc) })
		}
		synctest.Wait()
		close(writeGate) // the batch captures the waiting Get, is refused twice, pauses
		synctest.Wait()
		close(readGate) // the held read answered: the waiting Get can read now
		synctest.Wait()
		select {
		case <-getDone:
		default:
			t.Errorf("a Get is still waiting while the batch pauses before retrying")
		}
		wg.Wait()
		tookMu.Lock()
		t.Logf("the Get returned after %v (fake time)", took)
		tookMu.Unlock()
	})
}

// exactDoc is a T that encoding/json decodes to the very value it
// encoded: arrays of tagged structs, float32, a named string.
type exactDoc struct {
	N     int
	Name  namedText `json:"name,omitempty"`
	F32   float32
	Items [2]exactItem `json:"items"`
}

type namedText string

type exactItem struct {
	ID    int64  `json:"id"`
	Label string `json:"label,omitempty"`
}

// Nothing a caller holds after an Update or a Get (its Doc's Value, or
// the *T its mutate was given and kept) is shared with the value the
// version cache keeps, or with another
// caller: changing them changes no later Update or Get.
func TestKeptValueNotSharedWithCallers(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[exactDoc](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "k", exactDoc{N: 1, Name: "a", F32: 0.1}); err != nil {
		t.Fatal(err)
	}
	var kept *exactDoc
	d, err := s.Update(ctx, "k", func(v *exactDoc) error {
		kept = v
		v.N++
		v.Items[0] = exactItem{ID: 7, Label: "x"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The caller scribbles on everything it holds.
	kept.N, kept.Name, kept.Items[0].Label = 999, "scribbled", "scribbled"
	d.Value.N, d.Value.Items[0].ID = 998, 998
	g, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	g.Value.Items[1].Label = "scribbled"
	want := exactDoc{N: 2, Name: "a", F32: 0.1, Items: [2]exactItem{{ID: 7, Label: "x"}}}
	for i := range 3 {
		var seen exactDoc
		d, err := s.Update(ctx, "k", func(v *exactDoc) error {
			seen = *v
			v.N++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if seen != want {
			t.Fatalf("Update %d started from %+v, want %+v (a caller's value leaked into the cache)", i, seen, want)
		}
		want.N++
		d.Value.Name = "scribbled" // never seen by the next
	}
}

// Many goroutines increment one counter through Updates while others Get
// it, on the default Store (group commit, shared reads, the version
// cache): each Get sees at least every increment that returned before it
// was called and at most those called before it returned, and nothing is
// lost (under -race).
func TestGetsBetweenCompletedAndStartedUpdates(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[exactDoc](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "k", exactDoc{}); err != nil {
		t.Fatal(err)
	}
	const writers, readers, perWriter, perReader = 8, 8, 40, 60
	var mu sync.Mutex
	started, completed := 0, 0
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range perWriter {
				mu.Lock()
				started++
				mu.Unlock()
				if _, err := s.Update(ctx, "k", func(v *exactDoc) error { v.N++; return nil }); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				completed++
				mu.Unlock()
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for range perReader {
				mu.Lock()
				low := completed
				mu.Unlock()
				d, err := s.Get(ctx, "k")
				mu.Lock()
				high := started
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if d.Value.N < low || d.Value.N > high {
					t.Errorf("Get saw N=%d, want within [%d, %d]", d.Value.N, low, high)
					return
				}
			}
		})
	}
	wg.Wait()
	if d, err := s.Get(ctx, "k"); err != nil || d.Value.N != writers*perWriter {
		t.Errorf("final %+v, %v; want N=%d", d.Value, err, writers*perWriter)
	}
}

// panicky is the JSON codec, whose Unmarshal panics while armed.
type panicky struct {
	mu    sync.Mutex
	armed bool
}

func (p *panicky) Marshal(v any) ([]byte, error) { return etagstore.JSON.Marshal(v) }
func (p *panicky) Unmarshal(data []byte, v any) error {
	p.mu.Lock()
	armed := p.armed
	p.mu.Unlock()
	if armed {
		panic("attack: codec panics")
	}
	return etagstore.JSON.Unmarshal(data, v)
}

// A codec that panics in the Gets sharing a read (the one whose read was
// in flight and the ones that waited) fails those Gets only: the key is
// not left with a read marked in flight, and later Gets are answered.
func TestPanickingCodecLeavesNoKeyBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		gate := make(chan struct{})
		hb := &hookBackend{Backend: memstore.New(nil)}
		hb.afterRead = func(ctx context.Context, _ string, _ driver.Item, _ error) {
			if role(ctx) == "held" {
				<-gate
			}
		}
		codec := &panicky{}
		s := etagstore.New[counter](hb, &etagstore.Options{Codec: codec})
		if _, err := s.Create(ctx, "k", counter{N: 1}); err != nil {
			t.Fatal(err)
		}
		codec.armed = true
		var wg sync.WaitGroup
		var panics sync.WaitGroup
		for i := range 4 { // one read in flight (held), three waiting
			ctx := ctx
			if i == 0 {
				ctx = as(ctx, "held")
			}
			wg.Go(func() {
				defer func() {
					if recover() != nil {
						panics.Done()
					}
				}()
				panics.Add(1)
				_, _ = s.Get(ctx, "k")
				panics.Done() // (not reached)
			})
			synctest.Wait()
		}
		close(gate)
		wg.Wait()
		panics.Wait()
		codec.mu.Lock()
		codec.armed = false
		codec.mu.Unlock()
		if d, err := s.Get(ctx, "k"); err != nil || d.Value.N != 1 {
			t.Errorf("Get after the panics: %+v, %v; want N=1", d.Value, err)
		}
	})
}

// deepText hides text in arrays of arrays and in a named string type
// inside an array of structs.
type deepText struct {
	Grid  [2][2]string
	Names [2]namedText
	Items [1]exactItem
}

// The Store refuses text JSON would change (invalid UTF-8 becomes
// U+FFFD): that refusal must reach text inside arrays, arrays of arrays
// and arrays of structs, or the value an Update returns would differ from
// what decoding the stored bytes gives.
func TestInvalidUTF8InArraysRefused(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[deepText](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "k", deepText{}); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*deepText){
		"array of arrays":          func(v *deepText) { v.Grid[1][0] = "a\xffb" },
		"array of named strings":   func(v *deepText) { v.Names[1] = "\xc3" },
		"array of structs' fields": func(v *deepText) { v.Items[0].Label = "\xed\xa0\x80" }, // a surrogate
	} {
		_, err := s.Update(ctx, "k", func(v *deepText) error { mutate(v); return nil })
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("%s: Update returned %v, want ErrInvalidInput", name, err)
		}
		d, err := s.Get(ctx, "k")
		if err != nil || d.Value != (deepText{}) {
			t.Errorf("%s: after the refused Update, Get: %+v, %v; want the zero document", name, d.Value, err)
		}
	}
}

// A Get that arrives while another caller's read of the key is in flight
// waits for that read to be answered, however long it takes: when it
// stalls (a connection that went silent; the Azure SDK sets no per-try
// timeout by default) and its caller set no deadline, every later Get of
// the key waits with it — forever, for a caller without a deadline of its
// own — where each would have read on its own before shared reads. Nothing
// requires the wait: the shared read is linearizable for its callers as
// soon as it is sent after each was called. The Get here must be answered
// within 10 s (fake time) while the first read stays stalled: a shared
// read still unsent after maxSharedWait is sent on its own.
func TestStalledReadDoesNotHoldLaterGets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		stall := make(chan struct{})
		hb := &hookBackend{Backend: memstore.New(nil)}
		hb.afterRead = func(ctx context.Context, _ string, _ driver.Item, _ error) {
			if role(ctx) == "held" {
				<-stall // the first caller's read never comes back
			}
		}
		s := etagstore.New[counter](hb, nil)
		if _, err := s.Create(ctx, "k", counter{N: 1}); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = s.Get(as(ctx, "held"), "k") }() // no deadline; its read stalls
		synctest.Wait()
		done := make(chan error, 1)
		go func() { _, err := s.Get(ctx, "k"); done <- err }()
		answered := false
		select {
		case err := <-done:
			answered = true
			if err != nil {
				t.Errorf("Get: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("a Get is still waiting after 10 s for another caller's stalled read of the key (it would have read on its own)")
		}
		close(stall)
		if !answered {
			<-done
		}
	})
}
