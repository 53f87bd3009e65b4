package etagstore_test

// Group commit of Updates: members of one batch whose mutate panics, ends
// its goroutine (runtime.Goexit), fails, or writes the key itself (a
// nested Update). Each must affect only its own caller: the others' mutations
// land once, and the key stays usable with no goroutine left.
import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// heldSolo is a Store of logDoc whose "solo" caller's write waits for
// gate: callers arriving meanwhile queue and go in one batch.
func heldSolo(t *testing.T) (*etagstore.Store[logDoc], chan struct{}) {
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[logDoc](hb, nil)
	if _, err := s.Create(context.Background(), "k", logDoc{}); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	hb.writeHook = func(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
		if role(ctx) == "solo" {
			<-gate
		}
		return "", nil, false
	}
	return s, gate
}

func appendLog(name string) func(*logDoc) error {
	return func(d *logDoc) error { d.Log = append(d.Log, name); return nil }
}

type panicValue struct{ who string }

func TestGroupedUpdatePanicAndGoexitInBatchAreTheirCallersOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		s, gate := heldSolo(t)
		ctx := context.Background()
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Update(as(ctx, "solo"), "k", appendLog("solo")); err != nil {
				t.Errorf("solo: %v", err)
			}
		})
		synctest.Wait()
		errs := make(map[string]error)
		var mu sync.Mutex
		var recovered any
		goexited := false
		for _, name := range []string{"a", "panic", "b", "goexit", "fail", "c"} {
			wg.Go(func() {
				switch name {
				case "panic":
					defer func() { recovered = recover() }()
					s.Update(ctx, "k", func(d *logDoc) error { panic(panicValue{"p"}) })
					t.Errorf("Update with a panicking mutate returned")
				case "goexit":
					defer func() {
						if r := recover(); r == nil {
							goexited = true
						}
					}()
					s.Update(ctx, "k", func(d *logDoc) error { runtime.Goexit(); return nil })
					t.Errorf("Update with a Goexit mutate returned")
				case "fail":
					_, err := s.Update(ctx, "k", func(d *logDoc) error { d.Log = append(d.Log, "fail"); return errors.New("mine") })
					mu.Lock()
					errs[name] = err
					mu.Unlock()
				default:
					_, err := s.Update(ctx, "k", appendLog(name))
					mu.Lock()
					errs[name] = err
					mu.Unlock()
				}
			})
			synctest.Wait() // arrival order fixed
		}
		close(gate)
		wg.Wait()
		if pv, ok := recovered.(panicValue); !ok || pv.who != "p" {
			t.Errorf("the panicking caller recovered %#v", recovered)
		}
		if !goexited {
			t.Errorf("the Goexit caller's goroutine did not end by Goexit")
		}
		for _, n := range []string{"a", "b", "c"} {
			if errs[n] != nil {
				t.Errorf("%s: %v", n, errs[n])
			}
		}
		if errs["fail"] == nil || errs["fail"].Error() != "mine" {
			t.Errorf("fail: %v", errs["fail"])
		}
		got, err := s.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"solo", "a", "b", "c"}
		if fmt.Sprint(got.Value.Log) != fmt.Sprint(want) {
			t.Errorf("stored %v, want %v", got.Value.Log, want)
		}
		if _, err := s.Update(ctx, "k", appendLog("after")); err != nil {
			t.Errorf("after: %v", err)
		}
	})
}

// The first caller of an idle key panics (or Goexits) in its mutate while
// others queue: they are still served, and the key's group ends.
func TestGroupedUpdateFirstCallerPanicOrGoexitLeavesQueueServed(t *testing.T) {
	for _, how := range []string{"panic", "goexit"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer runOutTimers()
				s := etagstore.New[logDoc](memstore.New(nil), nil)
				ctx := context.Background()
				if _, err := s.Create(ctx, "k", logDoc{}); err != nil {
					t.Fatal(err)
				}
				gate := make(chan struct{})
				entered := make(chan struct{})
				var wg sync.WaitGroup
				wg.Go(func() {
					defer func() { recover() }()
					s.Update(ctx, "k", func(d *logDoc) error {
						close(entered)
						<-gate
						if how == "panic" {
							panic("first")
						}
						runtime.Goexit()
						return nil
					})
				})
				<-entered
				for i := range 4 {
					wg.Go(func() {
						if _, err := s.Update(ctx, "k", appendLog(fmt.Sprint(i))); err != nil {
							t.Errorf("%d: %v", i, err)
						}
					})
				}
				synctest.Wait() // all queued, the first blocked (before SlotTimeout on the bubble's clock)
				close(gate)
				wg.Wait()
				got, _ := s.Get(ctx, "k")
				if len(got.Value.Log) != 4 {
					t.Errorf("stored %v", got.Value.Log)
				}
				if _, err := s.Update(ctx, "k", appendLog("after")); err != nil {
					t.Errorf("after: %v", err)
				}
			})
		})
	}
}

// A batch member's mutate makes a nested Update of the same key: the
// member fails with ErrInvalidInput, the nested write lands once, the
// others land, nothing deadlocks.
func TestGroupedUpdateNestedSameKeyInBatchMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		s, gate := heldSolo(t)
		ctx := context.Background()
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Update(as(ctx, "solo"), "k", appendLog("solo")); err != nil {
				t.Errorf("solo: %v", err)
			}
		})
		synctest.Wait()
		var nestedErr, outerErr error
		errs := make([]error, 2)
		wg.Go(func() {
			_, errs[0] = s.Update(ctx, "k", appendLog("a"))
		})
		synctest.Wait()
		wg.Go(func() {
			_, outerErr = s.Update(ctx, "k", func(d *logDoc) error {
				_, nestedErr = s.Update(ctx, "k", appendLog("nested"))
				d.Log = append(d.Log, "outer")
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() {
			_, errs[1] = s.Update(ctx, "k", appendLog("b"))
		})
		synctest.Wait()
		close(gate)
		wg.Wait()
		if nestedErr != nil {
			t.Errorf("nested: %v", nestedErr)
		}
		if !errors.Is(outerErr, etagstore.ErrInvalidInput) {
			t.Errorf("outer: %v, want ErrInvalidInput", outerErr)
		}
		for i, e := range errs {
			if e != nil {
				t.Errorf("member %d: %v", i, e)
			}
		}
		got, _ := s.Get(ctx, "k")
		for _, n := range []string{"solo", "a", "b", "nested"} {
			if countIn(got.Value.Log, n) != 1 {
				t.Errorf("%s appears %d times in %v", n, countIn(got.Value.Log, n), got.Value.Log)
			}
		}
		if countIn(got.Value.Log, "outer") != 0 {
			t.Errorf("outer landed: %v", got.Value.Log)
		}
	})
}
