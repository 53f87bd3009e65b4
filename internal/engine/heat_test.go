package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// manualClock is a Clock whose time moves only when the test moves it.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time                                   { return c.now }
func (c *manualClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A million keys, each contended once and then left idle, leave almost
// nothing behind once two windows have passed: per-key heat is bounded by
// the keys contended lately, not by every key the process ever saw.
func TestContentionForgetsIdleKeys(t *testing.T) {
	const keys = 1_000_000
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var c Heat
	before := heapInUse()
	for i := range keys {
		c.Learn(fmt.Sprintf("key-%07d", i), 2, clock) // lost one race
	}
	if got := c.Warmth("key-0000042"); got != 1 {
		t.Fatalf("a key that lost a race has warmth %d, want 1", got)
	}
	held := heapInUse()
	clock.now = clock.now.Add(2 * heatWindow)
	c.Learn("another", 1, clock) // any later write turns the window
	after := heapInUse()
	t.Logf("heap: %d MB before, %d MB with %d warm keys, %d KB after they idled", before>>20, held>>20, keys, after>>10)
	if after > before && after-before > 5<<20 {
		t.Errorf("heap grew by %d bytes after the keys went idle, want < 5 MB", after-before)
	}
	if got := c.Warmth("key-0000042"); got != 0 {
		t.Errorf("an idle key kept warmth %d", got)
	}
}

// A key that keeps losing races stays warm across windows, up to maxHeat,
// and cools one step per write that wins at once.
func TestContentionKeepsHotKeysWarm(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var c Heat
	for range 20 {
		c.Learn("hot", 3, clock)
		clock.now = clock.now.Add(heatWindow / 2)
	}
	if got := c.Warmth("hot"); got != maxHeat {
		t.Fatalf("a key losing races for 10 windows has warmth %d, want %d", got, maxHeat)
	}
	c.Learn("hot", 1, clock)
	if got := c.Warmth("hot"); got != maxHeat-1 {
		t.Errorf("after one uncontended write warmth %d, want %d", got, maxHeat-1)
	}
}

// sendRun writes key n times back to back from a copy, each send taking
// send, and returns after which writes (1-based) a pause came and how long
// the pauses were in all.
func sendRun(h *Heat, clock *manualClock, key string, n int, send time.Duration) (at []int, paused time.Duration) {
	for i := 1; i <= n; i++ {
		p, last := h.Pause(key, clock)
		if last {
			h.Ended(key, clock) // the write is sent, marked
		}
		if p > 0 {
			at = append(at, i)
			paused += p
			clock.now = clock.now.Add(p)
		}
		clock.now = clock.now.Add(send)
		h.Won(key, send, true, "", clock)
		h.Learn(key, 1, clock)
	}
	return at, paused
}

// A run of wins from copies with no sign of rivals pauses to probe for
// them after 128 sends, then after twice as many each time: 2 pauses of 3
// sends in 500 sends. After a lost race, a run pauses once it has lasted
// 5 sends (before every 6th write), until 100 sends' time has passed
// without another loss; then the probes start over from 128 sends.
func TestTurns(t *testing.T) {
	const send = 30 * time.Millisecond // 5 sends: longer than turnFloor
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var h Heat
	at, paused := sendRun(&h, clock, "k", 500, send)
	if want := []int{130, 387}; fmt.Sprint(at) != fmt.Sprint(want) || paused != 2*turnPause*send {
		t.Errorf("lone writer: pauses before sends %v (%v in all), want before %v", at, paused, want)
	}

	h.Rival("k", clock) // a lost race: a rival
	at, _ = sendRun(&h, clock, "k", 250, send)
	n := len(at)
	if n < 10 || at[0] != 7 || at[1]-at[0] != 6 || at[n-2]-at[n-3] != 6 {
		t.Fatalf("after a lost race: pauses before sends %v, want one before every 6th", at)
	}
	if gap := at[n-1] - at[n-2]; gap < probeFirst || gap > probeFirst+turnLength+1 {
		t.Errorf("after a lost race: pauses before sends %v, want probes (128 sends apart) once 100 sends passed without a loss", at)
	}

	// Idle for a pause's length between writes: no run builds up.
	for range 50 {
		if p, _ := h.Pause("k", clock); p > 0 {
			t.Fatalf("a write after an idle spell paused %v", p)
		}
		clock.now = clock.now.Add(send + turnPause*send + time.Millisecond)
		h.Won("k", send, true, "", clock)
	}

	// A key written only from reads is never tracked.
	var cold Heat
	for range 100 {
		cold.Won("r", send, false, "", clock)
		if p, _ := cold.Pause("r", clock); p > 0 {
			t.Fatalf("a key written from reads paused %v", p)
		}
	}
	if !cold.idle() {
		t.Error("a key written only from reads is tracked")
	}
}

// seniority leaves a young write's backoff as it is, then shrinks it as
// the write waits longer, never below the floor.
func TestSeniority(t *testing.T) {
	const took, floor = 40 * time.Millisecond, time.Millisecond // 4 attempts: longer than turnFloor
	limit := 250 * time.Millisecond
	for _, c := range []struct {
		waited, want time.Duration
	}{
		{0, limit},
		{patience * took, limit},
		{2 * patience * took, took},
		{4 * patience * took, took / 2},
		{1000 * patience * took, floor},
	} {
		if got := seniority(limit, took, c.waited, floor); got != c.want {
			t.Errorf("waited %v: cap %v, want %v", c.waited, got, c.want)
		}
	}
	if got := seniority(time.Millisecond*10, took, 2*patience*took, floor); got != 10*time.Millisecond {
		t.Errorf("a cap below the senior one grew to %v", got)
	}
	if got := seniority(limit, 0, time.Hour, floor); got != limit {
		t.Errorf("an attempt that took no time changed the cap to %v", got)
	}
	// Fast attempts (1 ms: loopback) wait turnFloor before they shrink.
	if got := seniority(limit, time.Millisecond, turnFloor, floor); got != limit {
		t.Errorf("after waiting turnFloor, 1 ms attempts have cap %v, want %v", got, limit)
	}
	if got := seniority(limit, time.Millisecond, 2*turnFloor, floor); got != time.Millisecond {
		t.Errorf("after waiting 2 turnFloors, 1 ms attempts have cap %v, want 1ms", got)
	}
}

// Wins from copies alone make Heat follow at most maxRuns keys a window;
// a key that loses a race is followed whatever the count.
func TestTurnsFollowBoundedKeys(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var h Heat
	for i := range 3 * maxRuns {
		h.Won(fmt.Sprintf("key-%d", i), time.Millisecond, true, "", clock)
	}
	if n := len(h.cur) + len(h.old); n != maxRuns {
		t.Errorf("following %d keys after wins on %d, want %d", n, 3*maxRuns, maxRuns)
	}
	h.Learn("lost", 2, clock)
	if h.Warmth("lost") != 1 {
		t.Error("a key that lost a race is not followed once the bound is reached")
	}
}

// One write per key and Store is senior at a time: the one waiting
// longest of those that ask, until it retires or stops asking for
// seniorLease; then the next.
func TestSeniorIsOnePerKey(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	since := clock.now
	var h Heat
	a, b := new(int), new(int)
	if !h.Senior("k", a, since, clock) || h.Senior("k", b, since, clock) || !h.Senior("k", a, since, clock) {
		t.Fatal("a second write took the senior place while the first held it")
	}
	if !h.Senior("other", b, since, clock) {
		t.Fatal("another key's senior place is taken")
	}
	h.Retire("k", a)
	if !h.Senior("k", b, since, clock) {
		t.Fatal("the place was not free after its write retired")
	}
	clock.now = clock.now.Add(seniorLease + time.Millisecond)
	if !h.Senior("k", a, since, clock) {
		t.Error("a senior that stopped asking kept its place past seniorLease")
	}
	if older := new(int); !h.Senior("k", older, since.Add(-time.Millisecond), clock) || h.Senior("k", a, since, clock) {
		t.Error("a write waiting longer than the senior did not take its place")
	}
}
