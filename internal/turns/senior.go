package turns

import (
	"time"

	"github.com/etagstore/etagstore/internal/engine"
)

// This file is seniority: of a Store's writes of a key that lost their
// races, the one that has waited longest (its senior write) retries more
// often the longer it waits, and only it waits for the key's turn
// (wait.go): one poller per key and Store, however many wait.

// seniorPlace is a key's senior write in the Store.
type seniorPlace struct {
	senior      *write    // the Store's longest-waiting write of the key (nil: none)
	seniorSince time.Time // when it last claimed it
	seniorWait  time.Time // since when it has waited
}

const (
	seniorLease = time.Second // a senior write that has not asked for this long loses its place

	// patience is how many attempts' time (and at least a turn, turnFloor)
	// a write that lost its races waits before its backoff shrinks
	// (seniority).
	patience = 4
)

// claim reports whether w, a write of key waiting since since (the start
// of its delivery), is the Store's senior write of the key: the one that
// has waited longest of those asking. It takes the place when it is free,
// when its holder has not asked for seniorLease, or when its holder
// started waiting later; and keeps it until it retires or another takes
// it.
func (l *Layer) claim(key string, w *write, since time.Time, clock engine.Clock) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := clock.Now()
	l.rotateWindows(now)
	e := l.take(key, true)
	if e.senior != nil && e.senior != w && now.Sub(e.seniorSince) < seniorLease && !since.Before(e.seniorWait) {
		return false
	}
	e.senior, e.seniorSince, e.seniorWait = w, now, since
	return true
}

// retire gives up w's senior place for key, if it holds it.
func (l *Layer) retire(key string, w *write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idle() {
		return
	}
	if e := l.peek(key); e != nil && e.senior == w {
		e.senior = nil
	}
}

// senior reports whether w is its Store's senior write of key (claim),
// asked once w has waited its patience, or to wait for the key's turn.
func (w *write) senior(key string) bool {
	if w.claimed != "" && w.claimed != key { // a transaction's first key changed
		w.retire()
	}
	if !w.l.claim(key, w, w.began, w.env.Clock) {
		return false
	}
	w.claimed = key
	return true
}

// retire gives up the senior place w claimed, if any.
func (w *write) retire() {
	if w.claimed != "" {
		w.l.retire(w.claimed, w)
		w.claimed = ""
	}
}

// patient reports whether a write whose last attempt took took has waited
// its patience: patience attempts, and at least turnFloor.
func patient(took, waited time.Duration) bool {
	return took > 0 && waited > max(patience*took, turnFloor)
}

// seniority is the backoff cap after a lost race of a write whose last
// attempt took took and which has waited waited in all, past its patience
// (patient): at most 2 attempts, scaled down by how much longer than its
// patience it has waited, and never below floor. The write of a key that
// has waited longest in a Store (claim) thus retries more often the
// longer it waits, and is the likeliest to take the key in its holder's
// pause (pause); the Store's other writes of the key back off as usual,
// so that many waiting writers do not flood the service.
func seniority(limit, took, waited, floor time.Duration) time.Duration {
	if !patient(took, waited) {
		return limit
	}
	wait := max(patience*took, turnFloor)
	senior := time.Duration(float64(2*took) * float64(wait) / float64(waited))
	return min(limit, max(senior, floor))
}
