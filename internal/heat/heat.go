// Package heat is a Store's contention warmth: how contended each key
// has been lately, which the delivery engine reads to start a write's
// backoff higher on a key that keeps losing races.
package heat

import (
	"sync"
	"time"
)

// Heat remembers, per key, how contended a Store has found it lately:
// each write that took several attempts warms the key one step (up to
// maxHeat), each that won at once cools it one step. A warm key's first
// backoff starts that many doublings up, so that writers — in this process
// and, since every process backs off alike, in others — spread out instead
// of colliding again, and cool keys keep the short first delay.
//
// Memory is bounded by the keys that took several attempts lately: heat
// lives in two generations of heatWindow each, and a key not written for
// two windows is forgotten, so a process that touches millions of keys
// holds heat for the ones busy lately. The zero Heat is ready; safe for
// concurrent use.
type Heat struct {
	mu    sync.Mutex
	cur   map[string]int // warmth of the keys written in this window
	old   map[string]int // the window before
	since time.Time      // when cur's window began
}

const (
	maxHeat    = 5
	heatWindow = time.Minute
)

// Warmth is how many doublings up key's first backoff starts.
func (h *Heat) Warmth(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n, ok := h.cur[key]; ok {
		return n
	}
	return h.old[key]
}

// Clock tells the time (the engine's Clock is one).
type Clock interface{ Now() time.Time }

// Learn records the outcome of a write of key that took attempts; clock
// tells the time (read only when some key is known).
func (h *Heat) Learn(key string, attempts int, clock Clock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if attempts <= 1 && len(h.cur) == 0 && len(h.old) == 0 {
		return // nothing known: nothing to cool, no clock read
	}
	h.rotateWindows(clock.Now())
	n, known := h.cur[key]
	if !known {
		if n, known = h.old[key]; known {
			delete(h.old, key) // moved to the current window
		}
	}
	switch {
	case !known && attempts <= 1:
		return
	case attempts > 1:
		n = min(n+1, maxHeat)
	case n > 0:
		n--
	}
	if h.cur == nil {
		h.cur = map[string]int{}
	}
	h.cur[key] = n
}

// rotateWindows starts a new window when the current one is over; two
// windows after it was last written a key is gone.
func (h *Heat) rotateWindows(now time.Time) {
	switch {
	case h.since.IsZero():
		h.since = now
	case now.Sub(h.since) >= 2*heatWindow:
		h.cur, h.old, h.since = nil, nil, now // idle for a whole window: all forgotten
	case now.Sub(h.since) >= heatWindow:
		h.cur, h.old, h.since = nil, h.cur, now
	}
}
