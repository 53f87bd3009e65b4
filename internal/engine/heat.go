package engine

import (
	"sync"
	"time"
)

// Heat remembers, per key, how hot a Store has found it lately: each
// write that lost a race warms the key one step (up to maxHeat), each that
// won at once cools it one step. A warm key's first backoff starts that
// many doublings up, so that writers — in this process and, since every
// process backs off alike, in others — spread out instead of colliding
// again, and cool keys keep the short first delay.
//
// Only warm keys take memory, and only while they are busy: heat lives in
// two generations of heatWindow each, and a key that loses no race for two
// windows is forgotten (cool again), so a process that touches millions of
// keys holds heat for the ones contended lately. The zero Heat is ready;
// safe for concurrent use.
type Heat struct {
	mu    sync.Mutex
	cur   map[string]int // warmed or looked at in this window
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

// Current reports whether key is warm now: the windows are moved on to
// clock's time first (read only when some key is warm).
func (h *Heat) Current(key string, clock Clock) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.cur) == 0 && len(h.old) == 0 {
		return false
	}
	h.turn(clock.Now())
	if n, ok := h.cur[key]; ok {
		return n > 0
	}
	return h.old[key] > 0
}

// Learn records the outcome of a write of key that took attempts; clock
// tells the time (read only when some key is warm).
func (h *Heat) Learn(key string, attempts int, clock Clock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if attempts <= 1 && len(h.cur) == 0 && len(h.old) == 0 {
		return // nothing warm: nothing to cool, no clock read
	}
	h.turn(clock.Now())
	n, ok := h.cur[key]
	if !ok {
		n = h.old[key]
		delete(h.old, key)
	}
	switch {
	case attempts > 1:
		n = min(n+1, maxHeat)
	case n > 0:
		n--
	}
	if n == 0 {
		delete(h.cur, key)
		return
	}
	if h.cur == nil {
		h.cur = map[string]int{}
	}
	h.cur[key] = n
}

// turn starts a new window when the current one is over; two windows
// after its last lost race a key is gone.
func (h *Heat) turn(now time.Time) {
	switch {
	case h.since.IsZero():
		h.since = now
	case now.Sub(h.since) >= 2*heatWindow:
		h.cur, h.old, h.since = nil, nil, now // idle for a whole window: all cool
	case now.Sub(h.since) >= heatWindow:
		h.cur, h.old, h.since = nil, h.cur, now
	}
}
