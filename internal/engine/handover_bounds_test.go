package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// A write that lost a race on a key whose writers take turns is still
// bounded by its policy's MaxElapsedTime: the retry loop never starts a
// wait (backoff) that ends past it, and it may overrun it by at most the
// attempt in flight (a read and a write). Here the key changes on every
// read and no turn's end comes; MaxElapsedTime is 60 ms, sends 13 ms.
func TestHandOverWithinMaxElapsedTime(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	send := 13 * time.Millisecond
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprint("v", i))
	}
	k := &waitedKey{clock: clock, send: send, script: versions(names...)}
	h := &Heat{}
	h.Won("k", send, true, clock)
	h.Rival("k", clock) // it lost the key
	h.TurnEnded("k", "B", clock)
	const maxElapsed = 60 * time.Millisecond
	env := &Env{Backend: k, Clock: clock, Heat: h, Hooks: waiterHooks{k: k},
		Policy: Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: maxElapsed}}
	stale := versions("stale")[0]
	stale.Verified = false
	began := clock.now
	d := New(env, "update", Based, []string{"k"}, overPlan, Options{Start: []Version{stale}})
	d.TakeTurns()
	_, err := d.Run(context.Background())
	took := clock.now.Sub(began)
	if !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("err %v, want a conflict", err)
	}
	if limit := maxElapsed + 2*send; took > limit {
		t.Errorf("the write took %v (%d reads, %d writes) under MaxElapsedTime %v; want at most %v", took, k.reads, len(k.writes), maxElapsed, limit)
	}
}

// A conditioned write (a fenced Replace or Delete, a Merge with an ETag)
// that lost its race can only fail: the version it must hold is gone.
// It does not take turns (only read-modify-writes do: TakeTurns), so it
// reads once and reports the conflict.
func TestPinnedWriteDoesNotWaitForTurn(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	send := 13 * time.Millisecond
	k := &waitedKey{clock: clock, send: send, script: versions("v0", "v1")}
	h := &Heat{}
	h.Won("k", send, true, clock)
	h.Rival("k", clock) // it lost the key
	h.TurnEnded("k", "B", clock)
	env := &Env{Backend: k, Clock: clock, Heat: h, Hooks: waiterHooks{k: k},
		Policy: Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
	errHeld := fmt.Errorf("%w: not the version held", driver.ErrConflict)
	plan := PlanFunc(func(d *Delivery, base []Version) (Request, error) {
		if base[0].ETag != "v0" {
			return nil, errHeld
		}
		return Request{d.Over(base[0], []byte("x"))}, nil
	})
	_, err := New(env, "replace", Based, []string{"k"}, plan, Options{}).Run(context.Background())
	if !errors.Is(err, errHeld) {
		t.Fatalf("err %v", err)
	}
	if k.reads != 2 {
		t.Errorf("%d reads before reporting the conflict, want 2 (one per attempt)", k.reads)
	}
}

// leaveAtTurnEnd is the flight of a group-commit batch a member of which
// leaves once, right when the write would end the Store's turn (its run,
// with a rival seen, has lasted a turn less a send).
type leaveAtTurnEnd struct {
	h     *Heat
	clock *stepClock
	left  bool
}

func (f *leaveAtTurnEnd) Hold() bool {
	f.h.mu.Lock()
	e := f.h.peek("k")
	ending := e != nil && !e.run.IsZero() && !e.ended && f.clock.now.Sub(e.run)+e.send >= max(turnLength*e.send, turnFloor)
	f.h.mu.Unlock()
	if ending && !f.left {
		f.left = true
		return false
	}
	return true
}
func (*leaveAtTurnEnd) Release() {}

// Every pause follows a write marked as its turn's end, also when a
// member of the batch left just as the marked write was to be sent (the
// write is built again without it): else the Stores waiting for the key
// see no turn end, and the pause passes unused.
func TestTurnEndSurvivesRedo(t *testing.T) {
	clock, h, env, cur := rivalHolder()
	fl := &leaveAtTurnEnd{h: h, clock: clock}
	lastMarked := false
	for i := range 20 {
		slept := len(clock.slept)
		res, err := New(env, "update", Based, []string{"k"}, overPlan, Options{Start: []Version{cur}, Flight: fl}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		paused := len(clock.slept) > slept
		m := res.Sent[0].Meta
		if paused && !lastMarked {
			t.Errorf("write %d paused (%v) with no turn's end written before it (member left: %v)", i, clock.slept[slept:], fl.left)
		}
		lastMarked = m.Yield != ""
		cur.ETag, cur.Meta, cur.Item.Meta = res.Out[0].ETag, m, res.Out[0].Meta
	}
	if !fl.left {
		t.Fatal("no member left at a turn's end")
	}
}

// busyKey is a key another Store writes all the time, fast: every read
// finds a new version, every 100th marked as a turn's end; reads take no
// clock time and writes 50 µs; every write of the waiter loses.
type busyKey struct {
	driver.Backend
	clock         *stepClock
	reads, writes int
}

type busyHooks struct {
	nopHooks
	k *busyKey
}

func (h busyHooks) Read(context.Context, string) (Version, error) {
	h.k.reads++
	name := fmt.Sprint("v", h.k.reads)
	if h.k.reads%100 == 0 {
		name = fmt.Sprint("end", h.k.reads)
	}
	return versions(name)[0], nil
}

func (k *busyKey) Write(context.Context, string, driver.Write) (driver.ETag, error) {
	k.clock.now = k.clock.now.Add(50 * time.Microsecond)
	k.writes++
	return "", fmt.Errorf("412: %w", driver.ErrConflict)
}

// A Store whose estimate of a send is 5 ms (one slow write a while ago)
// waits for a turn on a key the backend serves in microseconds. Over
// 1 s of its policy (MaxElapsedTime) it makes a bounded number of requests, as a write
// backing off does — not a hot loop of back-to-back reads and writes.
func TestHandOverWithStaleSendEstimate(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	k := &busyKey{clock: clock}
	h := &Heat{}
	h.Won("k", handoverMinSend, true, clock)
	h.Rival("k", clock) // it lost the key
	h.TurnEnded("k", "B", clock)
	env := &Env{Backend: k, Clock: clock, Heat: h, Hooks: busyHooks{k: k},
		Policy: Policy{InitialInterval: 4 * time.Millisecond, MaxInterval: 250 * time.Millisecond, MaxElapsedTime: time.Second}}
	d := New(env, "update", Based, []string{"k"}, overPlan, Options{})
	d.TakeTurns()
	_, err := d.Run(context.Background())
	if !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("err %v", err)
	}
	var slept time.Duration
	for _, d := range clock.slept {
		slept += d
	}
	t.Logf("%d reads, %d writes, slept %v in all", k.reads, k.writes, slept)
	if k.reads+k.writes > 1000 {
		t.Errorf("%d reads and %d writes in 1 s of MaxElapsedTime, sleeping %v", k.reads, k.writes, slept)
	}
}
