package turns

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/heat"
	"github.com/etagstore/etagstore/internal/meta"
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
	h := &Layer{}
	h.won("k", send, true, "", clock)
	h.rival("k", clock) // it lost the key
	h.turnEnded("k", "B", clock)
	const maxElapsed = 60 * time.Millisecond
	env := &engine.Env{Backend: k, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: waiterHooks{k: k},
		Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: maxElapsed}}
	stale := versions("stale")[0]
	stale.Verified = false
	began := clock.now
	d := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{Start: []engine.Version{stale}, TakeTurns: true})
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
// It does not take turns (only read-modify-writes do: Options.TakeTurns), so it
// reads once and reports the conflict.
func TestPinnedWriteDoesNotWaitForTurn(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	send := 13 * time.Millisecond
	k := &waitedKey{clock: clock, send: send, script: versions("v0", "v1")}
	h := &Layer{}
	h.won("k", send, true, "", clock)
	h.rival("k", clock) // it lost the key
	h.turnEnded("k", "B", clock)
	env := &engine.Env{Backend: k, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: waiterHooks{k: k},
		Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
	errHeld := fmt.Errorf("%w: not the version held", driver.ErrConflict)
	plan := engine.PlanFunc(func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
		if base[0].ETag != "v0" {
			return nil, errHeld
		}
		return engine.Request{d.Over(base[0], []byte("x"))}, nil
	})
	_, err := engine.New(env, "replace", engine.Based, []string{"k"}, plan, engine.Options{}).Run(context.Background())
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
	h     *Layer
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
		res, err := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{Start: []engine.Version{cur}, Flight: fl}).Run(context.Background())
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

func (h busyHooks) Read(context.Context, string) (engine.Version, error) {
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
	h := &Layer{}
	h.won("k", handoverMinSend, true, "", clock)
	h.rival("k", clock) // it lost the key
	h.turnEnded("k", "B", clock)
	env := &engine.Env{Backend: k, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: busyHooks{k: k},
		Policy: engine.Policy{InitialInterval: 4 * time.Millisecond, MaxInterval: 250 * time.Millisecond, MaxElapsedTime: time.Second}}
	d := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{TakeTurns: true})
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

// liveKey is one stored key: reads and writes take a send of clock; a
// write lands when its If-Match names the stored version.
type liveKey struct {
	driver.Backend
	clock *stepClock
	send  time.Duration
	cur   engine.Version
	n     int
	reads int
}

func newLiveKey(clock *stepClock, send time.Duration) *liveKey {
	return &liveKey{clock: clock, send: send, cur: versions("b")[0]}
}

func (k *liveKey) Write(_ context.Context, key string, w driver.Write) (driver.ETag, error) {
	k.clock.now = k.clock.now.Add(k.send)
	if w.Cond.ETag != k.cur.ETag {
		return "", fmt.Errorf("412: %w", driver.ErrConflict)
	}
	k.n++
	m := meta.Parse(w.Meta)
	k.cur = engine.Version{Item: driver.Item{Key: key, ETag: driver.ETag(fmt.Sprint("w", k.n)), Data: w.Data, Meta: w.Meta}, Meta: m, Exists: true, MetaKnown: true, Verified: true}
	return k.cur.ETag, nil
}

type liveHooks struct {
	nopHooks
	k *liveKey
}

func (h liveHooks) Read(context.Context, string) (engine.Version, error) {
	h.k.clock.now = h.k.clock.now.Add(h.k.send)
	h.k.reads++
	return h.k.cur, nil
}

func copyOf(v engine.Version) []engine.Version {
	v.Verified = false
	return []engine.Version{v}
}

// A Store whose write lost a race and then took the key (waiting for its
// turn) holds the key: its own next write that lost to it does not wait
// for another Store's turn's end (Layer.holds, wait.go: "not while it
// holds the key itself"); it reads once and writes.
func TestHandOverNotWhileHolding(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	send := 13 * time.Millisecond
	k := newLiveKey(clock, send)
	h := &Layer{}
	h.won("k", send, true, "", clock)
	h.rival("k", clock)
	h.turnEnded("k", "B", clock) // B's turns' ends read lately
	env := &engine.Env{Backend: k, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: liveHooks{k: k},
		Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
	stale := versions("stale")[0]
	d1 := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{Start: copyOf(stale), TakeTurns: true})
	if _, err := d1.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !h.holds("k", k.cur.ETag) {
		t.Error("the Store's write made the stored version, but Holding is false")
	}
	// Its own next write, from the copy its first write overwrote.
	reads := k.reads
	d2 := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{Start: copyOf(versions("b")[0]), TakeTurns: true})
	if _, err := d2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := k.reads - reads; n != 1 {
		t.Errorf("a write that lost to its own Store's write read %d times before writing, want 1 (no wait: the Store holds the key)", n)
	}
}

// A Store that marked its turn's end pauses before its next write from a
// copy, also when another write of the key in the same Store (a Save from
// a stale Doc) lost a race meanwhile: else that write would go out at
// once over the marked version, racing the waiter that the mark told to
// write at once.
func TestPauseAfterTurnEndSurvivesOtherLosses(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	send := 30 * time.Millisecond
	k := newLiveKey(clock, send)
	h := &Layer{}
	h.rival("k", clock) // a rival seen lately: turns
	env := &engine.Env{Backend: k, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: liveHooks{k: k},
		Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1, MaxAttempts: 1}}
	marked := false
	for i := 0; i < 40 && !marked; i++ {
		res, err := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{Start: copyOf(k.cur)}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		marked = res.Sent[0].Meta.Yield != ""
	}
	if !marked {
		t.Fatal("no turn's end marked")
	}
	// Another write of the Store, from a read but conditioned on a stale
	// version (a Save from a stale Doc), loses (MaxAttempts 1); then the
	// Store writes on from its copy.
	slept := len(clock.slept)
	stalePlan := engine.PlanFunc(func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
		b := base[0]
		b.ETag = "old"
		return engine.Request{d.Over(b, []byte("x"))}, nil
	})
	dx := engine.New(env, "save", engine.Based, []string{"k"}, stalePlan, engine.Options{})
	if _, err := dx.Run(context.Background()); err == nil {
		t.Fatal("the stale write landed")
	}
	if _, err := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{Start: copyOf(k.cur)}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	paused := time.Duration(0)
	for _, d := range clock.slept[slept:] {
		paused += d
	}
	if paused < turnPause*send {
		t.Errorf("the writes after a marked turn's end paused %v in all, want the turn's pause (%v)", paused, turnPause*send)
	}
}

// displacingHooks read the key as waiterHooks do, and after the first
// read of the wait let an older write of the same Store take the senior
// place.
type displacingHooks struct {
	waiterHooks
	h     *Layer
	began time.Time
	older *write
}

func (h displacingHooks) Read(ctx context.Context, key string) (engine.Version, error) {
	v, err := h.waiterHooks.Read(ctx, key)
	if h.k.reads == 2 {
		h.h.claim("k", h.older, h.began, h.k.clock)
	}
	return v, err
}

// A waiting write of the lowest class (two Stores ahead of it) that an
// older write of its Store displaces from the senior place mid-wait
// leaves the key to the Stores waiting before it and backs off; it does
// not write over the turn's end at once, ahead of them.
func TestDisplacedWaiterBacksOff(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	send := 13 * time.Millisecond
	k := &waitedKey{clock: clock, send: send, script: versions("endB")}
	h := &Layer{}
	h.won("k", send, true, "", clock)
	h.rival("k", clock)
	for _, s := range []string{"B", "C", "D"} {
		h.turnEnded("k", s, clock)
	}
	older := new(write)
	env := &engine.Env{Backend: k, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: displacingHooks{waiterHooks: waiterHooks{k: k}, h: h, began: clock.now.Add(-time.Second), older: older},
		Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
	stale := versions("stale")[0]
	stale.Verified = false
	d := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{Start: []engine.Version{stale}, TakeTurns: true})
	if _, err := d.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// class 0 on endB: two more reads (3 in all) before writing.
	if k.readsAt[1] < 3 {
		t.Errorf("the displaced waiter wrote over the turn's end after %d reads, before its class's turn (3): it jumped the Stores waiting ahead", k.readsAt[1])
	}
}
