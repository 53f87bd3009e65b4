package reentry

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// The probe finds the six return addresses a chain's frames hold.
func TestReentryProbe(t *testing.T) {
	if len(chainFrames) != 6 {
		t.Fatalf("probe found %d chain frames, want 6: %+v", len(chainFrames), chainFrames)
	}
}

// A chain spells its slot, whatever the slot, and however deep below it
// the stack is read; chains nested on one stack are read innermost first.
func TestReentryChainSpellsSlot(t *testing.T) {
	slots := []uint32{0, 1, 2, 1<<slotBits - 1, 1 << (slotBits - 1), 0xa5a & (1<<slotBits - 1)}
	for range 50 {
		slots = append(slots, rand.Uint32N(1<<slotBits))
	}
	for _, slot := range slots {
		for _, depth := range []int{0, 5, 63, 64, 65, 200} {
			var got []uint32
			_ = tagged(slot, func() error {
				got = deep(depth, onStack)
				return nil
			})
			if !slices.Equal(got, []uint32{slot}) {
				t.Fatalf("slot %#x read %d frames below its chain: %#x", slot, depth, got)
			}
		}
	}
	var got []uint32
	_ = tagged(7, func() error {
		return tagged(1<<slotBits-1, func() error { got = deep(70, onStack); return nil })
	})
	if !slices.Equal(got, []uint32{1<<slotBits - 1, 7}) {
		t.Errorf("nested chains read as %#x", got)
	}
	if got := onStack(); len(got) != 0 {
		t.Errorf("outside any chain, onStack = %v", got)
	}
}

// deep calls f n frames down.
//
//go:noinline
func deep(n int, f func() []uint32) []uint32 {
	if n == 0 {
		return f()
	}
	return deep(n-1, f)
}

// A write of the key landing from inside Run's user code ends Run with a
// *SelfWriteError (ErrInvalidInput, and no other sentinel), one line; so
// does one that may have landed, unsure.
func TestReentrySelfWrite(t *testing.T) {
	for _, unsure := range []bool{false, true} {
		var r Reentry
		err := r.Run("Update", "k", func() error {
			r.landed("Replace", []string{"k"}, unsure)
			return nil
		})
		var sw *SelfWriteError
		if !errors.As(err, &sw) || sw.By != "Replace" || sw.Unsure != unsure || sw.Key != "k" {
			t.Fatalf("Run = %v, want a *SelfWriteError by Replace", err)
		}
		if s := driver.SentinelOf(err); s != driver.ErrInvalidInput {
			t.Errorf("%v matches %v, want ErrInvalidInput", err, s)
		}
		t.Log(err)
		wantClosed(t, &r)
	}
}

// What does not make the user code's key stale is not its mistake: a
// write of another key from inside it, or of its key beside it (another
// goroutine, which Inside does not see either), and f's own error comes
// back as it is.
func TestReentryNotSelf(t *testing.T) {
	var r Reentry
	err := r.Run("Update", "k", func() error {
		r.landed("Upsert", []string{"other"}, false)
		var wg sync.WaitGroup
		wg.Go(func() {
			if r.Inside("k") {
				t.Error("another goroutine reads as inside the user code")
			}
			r.landed("Update", []string{"k"}, false)
		})
		wg.Wait()
		if !r.Inside("k") || r.Inside("other") {
			t.Error("Inside: the user code's own goroutine is inside it for k alone")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	own := errors.New("mine")
	err = r.Run("Update", "k", func() error {
		r.landed("Update", []string{"k"}, false)
		return own
	})
	if err != own {
		t.Errorf("Run = %v, want f's own error", err)
	}
}

// Two runs open for one key on two goroutines: a write from inside one
// marks that one only. Runs nested on one goroutine are both marked.
func TestReentryWhichRun(t *testing.T) {
	var r Reentry
	inA, wrote := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() {
		errA = r.Run("Update", "k", func() error {
			close(inA)
			<-wrote // B writes k from inside its run meanwhile
			return nil
		})
	})
	wg.Go(func() {
		<-inA
		errB = r.Run("Update", "k", func() error {
			r.landed("Upsert", []string{"k"}, false)
			close(wrote)
			return nil
		})
	})
	wg.Wait()
	if errA != nil {
		t.Errorf("the run beside the write: %v, want nil", errA)
	}
	if !errors.As(errB, new(*SelfWriteError)) {
		t.Errorf("the run the write came from: %v, want a *SelfWriteError", errB)
	}
	var inner error
	outer := r.Run("Update", "k", func() error {
		inner = r.Run("Update", "k", func() error {
			r.landed("Delete", []string{"k"}, false)
			return nil
		})
		return nil
	})
	if !errors.As(inner, new(*SelfWriteError)) || !errors.As(outer, new(*SelfWriteError)) {
		t.Errorf("nested runs: inner %v, outer %v; want both *SelfWriteError", inner, outer)
	}
}

// A panic in the user code leaves no scope open.
func TestReentryPanic(t *testing.T) {
	var r Reentry
	func() {
		defer func() { _ = recover() }()
		_ = r.Run("Update", "k", func() error { panic("boom") })
	}()
	wantClosed(t, &r)
	var nilR *Reentry
	if err := nilR.Run("Update", "k", func() error { return nil }); err != nil || nilR.Inside("k") {
		t.Errorf("a nil Reentry: %v", err)
	}
}

// NoteWritten, which Delivery.Run calls, marks the keys a request that
// landed wrote, not those it only checked.
func TestReentryNoteWritten(t *testing.T) {
	r := &Reentry{}
	res := engine.Result{Sent: engine.Request{{Action: driver.Action{Key: "k"}}, {Action: driver.Action{Key: "c", Check: true}}}}
	err := r.Run("Update", "k", func() error {
		r.NoteWritten("Transact", []string{"k", "c"}, res, nil)
		return nil
	})
	var sw *SelfWriteError
	if !errors.As(err, &sw) || sw.By != "Transact" {
		t.Errorf("Run = %v, want a *SelfWriteError by Transact", err)
	}
	err = r.Run("Update", "c", func() error {
		r.NoteWritten("Transact", []string{"k", "c"}, res, nil)
		return nil
	})
	if err != nil {
		t.Errorf("a key only checked: Run = %v, want nil", err)
	}
	err = r.Run("Update", "k", func() error {
		r.NoteWritten("Update", []string{"k"}, engine.Result{}, &driver.OutcomeUnknownError{Op: "Update", Key: "k", Cause: errors.New("lost")})
		return nil
	})
	if !errors.As(err, &sw) || !sw.Unsure {
		t.Errorf("an unknown outcome: Run = %v, want an unsure *SelfWriteError", err)
	}
}

// wantClosed checks that no run of r is open, and no slot held by one.
func wantClosed(t *testing.T, r *Reentry) {
	t.Helper()
	for i := range r.open {
		if n := r.open[i].Load(); n != 0 {
			t.Errorf("bucket %d counts %d runs open", i, n)
		}
	}
	for i := range slots {
		if ru := slots[i].Load(); ru != nil && ru.r == r {
			t.Errorf("slot %d still held by a run of %q", i, ru.key)
		}
	}
}

// Every slot held: a run goes without one, unseen, and works.
func TestReentrySlotsFull(t *testing.T) {
	var held []uint32
	for {
		slot, ok := claim(&userRun{key: "filler"})
		if !ok {
			break
		}
		held = append(held, slot)
	}
	defer func() {
		for _, slot := range held {
			slots[slot].Store(nil)
		}
	}()
	var r Reentry
	ran := false
	err := r.Run("Update", "k", func() error {
		ran = true
		r.landed("Upsert", []string{"k"}, false)
		return nil
	})
	if err != nil || !ran {
		t.Errorf("Run with every slot held = %v (ran %v); want f run, unseen", err, ran)
	}
	wantClosed(t, &r)
}
