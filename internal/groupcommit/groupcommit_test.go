package groupcommit

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A first caller's group: arrivals queue; when it is done, a runner takes
// the queue, or the group ends.
func TestQueueFirstDone(t *testing.T) {
	var mu sync.Mutex
	started := 0
	q := newQueue(&mu, false, func() { started++ })
	if q.FirstDone() || started != 0 {
		t.Fatalf("an empty group's first caller done: runner %d, want the group to end", started)
	}
	q = newQueue(&mu, false, func() { started++ })
	q.Arrive(1)
	q.Arrive(2)
	q.Remove(1)
	if !q.FirstDone() || started != 1 {
		t.Fatalf("first caller done with a queue: runner started %d times, want 1", started)
	}
	if got := q.Take(); len(got) != 1 || got[0] != 2 || len(q.Members) != 0 {
		t.Errorf("Take = %v, queue left %v; want [2] and nothing", got, q.Members)
	}
	if !q.FirstDone() || started != 1 {
		t.Errorf("FirstDone after a runner took over started another (%d)", started)
	}
}

// Callers queued behind a first caller inside its user code wait for it
// at most SlotTimeout; one that left the user code keeps the group.
func TestQueueBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		started := 0
		q := newQueue(&mu, true, func() { started++ })
		mu.Lock()
		q.Arrive(1)
		mu.Unlock()
		time.Sleep(SlotTimeout + time.Millisecond) // the fake clock: the bound's timer fires
		synctest.Wait()
		mu.Lock()
		if started != 1 || q.First() {
			t.Errorf("after SlotTimeout inside user code: runner started %d times, first %v; want 1, false", started, q.First())
		}
		mu.Unlock()

		q = newQueue(&mu, true, func() { started++ })
		mu.Lock()
		q.Arrive(1)
		q.Leaving() // the user code returned before the bound
		mu.Unlock()
		time.Sleep(SlotTimeout + time.Millisecond)
		synctest.Wait()
		mu.Lock()
		if started != 1 || !q.First() {
			t.Errorf("a first caller out of its user code lost its group (runners %d)", started)
		}
		mu.Unlock()
	})
}

// A lingering runner is woken by the arrival that fills its batch.
func TestLingerWokenByArrivals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		q := newQueue(&mu, false, func() {})
		l := Lingering{Want: 2, Took: time.Second}
		done := make(chan struct{})
		go func() {
			q.Linger(&l)
			close(done)
		}()
		synctest.Wait()
		mu.Lock()
		q.Arrive(1)
		q.Arrive(2)
		mu.Unlock()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the runner lingers on with its batch full")
		}
		if l.misses != 0 {
			t.Errorf("a fruitful linger counted as vain (%d)", l.misses)
		}
	})
}

// A member that leaves: queued, it is taken out; in a slot not taken up,
// the runner is answered; applied, it learns whether its request is in
// flight; answered, its result stands.
func TestMemberLeave(t *testing.T) {
	var mu sync.Mutex
	removed := false
	m := NewMember[int, string](context.Background())
	if answered, _ := m.Leave(func() { removed = true }, "left", nil); answered || !removed || m.Status != Left {
		t.Errorf("a queued member's Leave: answered %v, removed %v, status %v", answered, removed, m.Status)
	}
	m = NewMember[int, string](context.Background())
	m.Give(7)
	m.Leave(func() {}, "left", nil)
	if a, timedOut := m.Wait(time.NewTimer(time.Hour), time.Hour, nil); timedOut || a != "left" {
		t.Errorf("the runner waiting on a slot not taken up got %q (timed out %v), want left", a, timedOut)
	}
	m = NewMember[int, string](context.Background())
	applied := []*Caller{&m.Caller}
	f := NewFlight(&mu, func(yield func(*Caller) bool) {
		for _, c := range applied {
			if !yield(c) {
				return
			}
		}
	})
	m.Status = Applied
	if !f.Hold() {
		t.Fatal("Hold refused with every member in")
	}
	if _, inFlight := m.Leave(func() {}, "", &f); !inFlight {
		t.Error("an applied member leaving a request in flight was not told so")
	}
	if f.Hold() {
		t.Error("Hold with a member gone held")
	}
	m = NewMember[int, string](context.Background())
	m.Hand()
	if answered, _ := m.Leave(func() {}, "", nil); !answered {
		t.Error("an answered member's Leave did not keep its result")
	}
}

// A batch's context ends when every member's has, and carries the first's
// values.
func TestContext(t *testing.T) {
	type key struct{}
	a, cancelA := context.WithCancel(context.WithValue(context.Background(), key{}, "a"))
	b, cancelB := context.WithCancel(context.Background())
	ctx, stop := Context([]context.Context{a, b})
	defer stop()
	if ctx.Value(key{}) != "a" {
		t.Error("the batch's context lost the first member's values")
	}
	cancelA()
	if ctx.Err() != nil {
		t.Fatal("one member leaving ended the batch's context")
	}
	cancelB()
	<-ctx.Done()
}

// runnerFuncs is a Runner of two funcs (end may be nil).
type runnerFuncs struct{ start, end func() }

func (f runnerFuncs) StartRunner() { f.start() }

func (f runnerFuncs) EndGroup() {
	if f.end != nil {
		f.end()
	}
}

func newQueue(mu sync.Locker, mutating bool, start func()) *Queue[int] {
	q := &Queue[int]{}
	q.Init(mu, mutating, runnerFuncs{start: start})
	return q
}

// A runner that finds the queue empty after a batch of several callers
// parks it, with no goroutine: the arrival that brings back as many
// callers starts a runner at once; at the bound, a runner takes whoever
// came, or the group ends if nobody did. After a batch of one the group
// ends at once.
func TestParkAwaitsTheCallersABatchAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		started, ended := 0, 0
		q := &Queue[int]{}
		q.Init(&mu, false, runnerFuncs{start: func() { started++ }, end: func() { ended++ }})
		q.FirstDone()
		mu.Lock()
		if q.Park(&Lingering{Want: 1, Took: time.Second}) {
			t.Error("parked after a batch of one")
		}
		if q.Park(&Lingering{Want: 16, Took: 4*MinPark - time.Nanosecond}) {
			t.Error("parked for less than MinPark")
		}
		// Filled: a runner starts with the last arrival, before the bound.
		if !q.Park(&Lingering{Want: 3, Took: time.Second}) {
			t.Fatal("did not park after a batch of three")
		}
		q.Arrive(1)
		q.Arrive(2)
		if started != 0 {
			t.Errorf("a runner started with 2 of 3 callers back")
		}
		q.Arrive(3)
		if started != 1 {
			t.Errorf("%d runners started with every caller back, want 1", started)
		}
		q.Take()
		mu.Unlock()
		time.Sleep(time.Second) // the first park's timer passes: it is stale
		synctest.Wait()
		mu.Lock()
		if started != 1 || ended != 0 {
			t.Errorf("a filled park's timer acted: runners %d, ends %d", started, ended)
		}
		// Partly filled: at the bound a runner takes whoever came.
		q.Park(&Lingering{Want: 3, Took: time.Second})
		q.Arrive(4)
		mu.Unlock()
		time.Sleep(MaxLinger - time.Nanosecond)
		synctest.Wait()
		mu.Lock()
		if started != 1 {
			t.Error("a runner started before the bound")
		}
		mu.Unlock()
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		mu.Lock()
		if started != 2 || ended != 0 {
			t.Errorf("at the bound with one caller back: runners %d, ends %d; want 2, 0", started, ended)
		}
		q.Take()
		// Nobody back: the group ends at the bound.
		q.Park(&Lingering{Want: 3, Took: time.Second})
		mu.Unlock()
		time.Sleep(MaxLinger)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if started != 2 || ended != 1 {
			t.Errorf("at the bound with nobody back: runners %d, ends %d; want 2, 1", started, ended)
		}
	})
}
