package turns

import (
	"testing"
	"time"
)

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

// One write per key and Store is senior at a time: the one waiting
// longest of those that ask, until it retires or stops asking for
// seniorLease; then the next.
func TestSeniorIsOnePerKey(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	since := clock.now
	var h Layer
	a, b := new(write), new(write)
	if !h.claim("k", a, since, clock) || h.claim("k", b, since, clock) || !h.claim("k", a, since, clock) {
		t.Fatal("a second write took the senior place while the first held it")
	}
	if !h.claim("other", b, since, clock) {
		t.Fatal("another key's senior place is taken")
	}
	h.retire("k", a)
	if !h.claim("k", b, since, clock) {
		t.Fatal("the place was not free after its write retired")
	}
	clock.now = clock.now.Add(seniorLease + time.Millisecond)
	if !h.claim("k", a, since, clock) {
		t.Error("a senior that stopped asking kept its place past seniorLease")
	}
	if older := new(write); !h.claim("k", older, since.Add(-time.Millisecond), clock) || h.claim("k", a, since, clock) {
		t.Error("a write waiting longer than the senior did not take its place")
	}
}
