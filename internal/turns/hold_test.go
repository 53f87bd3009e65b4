package turns

import (
	"fmt"
	"testing"
	"time"
)

// sendRun writes key n times back to back from a copy, each send taking
// send, and returns after which writes (1-based) a pause came and how long
// the pauses were in all.
func sendRun(h *Layer, clock *manualClock, key string, n int, send time.Duration) (at []int, paused time.Duration) {
	for i := 1; i <= n; i++ {
		p, last := h.pause(key, clock)
		if last {
			h.ended(key, clock) // the write is sent, marked
		}
		if p > 0 {
			at = append(at, i)
			paused += p
			clock.now = clock.now.Add(p)
		}
		clock.now = clock.now.Add(send)
		h.won(key, send, true, "", clock)
		h.touch(key, 1, clock) // the write ended
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
	var h Layer
	at, paused := sendRun(&h, clock, "k", 500, send)
	if want := []int{130, 387}; fmt.Sprint(at) != fmt.Sprint(want) || paused != 2*turnPause*send {
		t.Errorf("lone writer: pauses before sends %v (%v in all), want before %v", at, paused, want)
	}

	h.rival("k", clock) // a lost race: a rival
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
		if p, _ := h.pause("k", clock); p > 0 {
			t.Fatalf("a write after an idle spell paused %v", p)
		}
		clock.now = clock.now.Add(send + turnPause*send + time.Millisecond)
		h.won("k", send, true, "", clock)
	}

	// A key written only from reads is never tracked.
	var cold Layer
	for range 100 {
		cold.won("r", send, false, "", clock)
		if p, _ := cold.pause("r", clock); p > 0 {
			t.Fatalf("a key written from reads paused %v", p)
		}
	}
	if !cold.idle() {
		t.Error("a key written only from reads is tracked")
	}
}

// Wins from copies alone make a Layer follow at most maxRuns keys a window;
// a key that loses a race is followed whatever the count.
func TestTurnsFollowBoundedKeys(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var h Layer
	for i := range 3 * maxRuns {
		h.won(fmt.Sprintf("key-%d", i), time.Millisecond, true, "", clock)
	}
	if n := len(h.cur) + len(h.old); n != maxRuns {
		t.Errorf("following %d keys after wins on %d, want %d", n, 3*maxRuns, maxRuns)
	}
	h.touch("lost", 2, clock)
	if h.peek("lost") == nil {
		t.Error("a key that lost a race is not followed once the bound is reached")
	}
}
