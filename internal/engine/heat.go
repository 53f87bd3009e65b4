package engine

import (
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// Heat remembers, per key, how contended a Store has found it lately.
//
// Warmth: each write that took several attempts warms the key one step
// (up to maxHeat), each that won at once cools it one step. A warm key's first
// backoff starts that many doublings up, so that writers — in this process
// and, since every process backs off alike, in others — spread out instead
// of colliding again, and cool keys keep the short first delay.
//
// Turns: a Store whose writes build on the version its last write made
// (group commit's chaining, the version cache) wins every race on a key
// that other processes also write — they must read before they write —
// and would keep the key while they starve; its own writes never lose, so
// it cannot see them. So a run of back-to-back wins on copies ends now
// and then: its last write is marked as the end of the Store's turn
// (meta's yield) and the Store pauses before its next write, and a writer
// of another process that is waiting for the key takes it in the pause,
// the one that has waited longest first (handover.go). While there is a
// sign of rivals (the Store lost a race on the key within turnMemory
// sends) a turn ends every turnLength sends, and the pause lasts
// turnPause sends. Without one, a run ends once after probeFirst sends,
// and then after twice as many each time the pause drew no rival: a lone
// writer pays a pause now and then, less and less often, and a rival that
// started while the key was held gets its first turn within probeFirst
// sends. A turn lasts at least turnFloor: where sends are fast (Azurite
// on loopback) shorter turns would spend the service on hand-overs.
//
// Memory is bounded by the keys that lost races lately, and by at most
// maxRuns keys a window whose runs of wins it follows with no race lost:
// heat lives in two generations of heatWindow each, and a key not written
// for two windows is forgotten, so a process that touches millions of
// keys holds heat for the ones busy lately. The zero Heat is ready; safe for
// concurrent use.
type Heat struct {
	mu    sync.Mutex
	name  string           // the Store's, in the turns' ends it marks (Name)
	cur   map[string]*heat // written in this window
	old   map[string]*heat // the window before
	since time.Time        // when cur's window began
}

// heat is one key's.
type heat struct {
	n     int           // warmth: doublings up
	rival time.Time     // the last sign of a rival writer
	run   time.Time     // when the current run of back-to-back wins began (zero: none)
	last  time.Time     // the last win
	send  time.Duration // how long a write of the key takes (moving average)
	probe int           // sends before the next pause without a sign of rivals
	ended bool          // the last write ended the Store's turn: pause before the next
	yield time.Time     // when the Store last read another Store's turn's end of the key
	wrote driver.ETag   // the version the Store's last write of the key made (Won)
	// holders are the other Stores whose turns' ends the Store read lately
	// (handover.go), by name: when it read the last.
	holders map[string]time.Time

	senior      any       // the Store's longest-waiting write of the key (nil: none)
	seniorSince time.Time // when it last claimed it
	seniorWait  time.Time // since when it has waited
}

const (
	maxHeat    = 5
	heatWindow = time.Minute

	turnLength = 5                      // sends a run of wins lasts before it pauses
	turnPause  = handoverClasses + 1    // the pause, in sends: a read for each class of waiting writers, and their write (handover.go)
	turnMemory = 100                    // sends after the last sign of a rival that turns go on
	probeFirst = 128                    // sends a run without a sign of rivals lasts before it pauses
	turnFloor  = 100 * time.Millisecond // the shortest turn, at any latency
	probeLast  = 1 << 16
	maxRuns    = 4096 // keys a window starts following on a win alone

	seniorLease = time.Second // a senior write that has not asked for this long loses its place
)

// Warmth is how many doublings up key's first backoff starts.
func (h *Heat) Warmth(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.peek(key); e != nil {
		return e.n
	}
	return 0
}

// Current reports whether key is warm now: the windows are moved on to
// clock's time first (read only when some key is known).
func (h *Heat) Current(key string, clock Clock) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idle() {
		return false
	}
	h.rotateWindows(clock.Now())
	e := h.peek(key)
	return e != nil && e.n > 0
}

// Learn records the outcome of a write of key that took attempts; clock
// tells the time (read only when some key is known).
func (h *Heat) Learn(key string, attempts int, clock Clock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if attempts <= 1 && h.idle() {
		return // nothing known: nothing to cool, no clock read
	}
	now := clock.Now()
	h.rotateWindows(now)
	e := h.take(key, attempts > 1)
	switch {
	case e == nil:
	case attempts > 1:
		e.n = min(e.n+1, maxHeat)
	case e.n > 0:
		e.n--
	}
}

// Rival records that a write of key lost a race (a 412, a copy found
// stale, a read changed under a transaction): another writer is there, and
// the Store takes turns (Pause). A write retried only because it was
// throttled or its answer was lost is no sign of one.
func (h *Heat) Rival(key string, clock Clock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := clock.Now()
	h.rotateWindows(now)
	e := h.take(key, true)
	e.rival, e.run, e.probe = now, time.Time{}, probeFirst // a new run starts at the next win
}

// Won records a write of key that landed after a send that took took,
// making version etag ("": not known; see Holding); copy says it was
// built on a copy (a version not read during its call). Clock is read
// only when the key is known or copy.
func (h *Heat) Won(key string, took time.Duration, copy bool, etag driver.ETag, clock Clock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !copy && h.idle() {
		return
	}
	e := h.peek(key)
	if e == nil && !copy {
		return
	}
	now := clock.Now()
	if e == nil {
		h.rotateWindows(now)
		if len(h.cur) >= maxRuns {
			return // following enough keys: one that loses a race is followed then
		}
		e = h.take(key, true)
	}
	if e.probe == 0 {
		e.probe = probeFirst
	}
	if e.send == 0 {
		e.send = took
	}
	e.send = (3*e.send + took) / 4
	e.wrote = etag
	if e.run.IsZero() || now.Sub(e.last) > turnPause*e.send {
		e.run = now // idle for a pause's length: others had their turn
	}
	e.last = now
}

// Pause says, before a write of key built on a copy is sent, how long it
// waits first and whether it is the last of the Store's turn (marked so,
// for the processes waiting for the key: handover.go). A run of
// back-to-back wins ends with the write sent once it has lasted turnLength
// sends less one (with a sign of rivals) or the probe's length (without),
// and at least turnFloor; once Ended says that write was sent, the write
// after it waits turnPause sends, and the run starts again. Otherwise zero
// and false.
func (h *Heat) Pause(key string, clock Clock) (wait time.Duration, last bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idle() {
		return 0, false
	}
	e := h.peek(key)
	if e == nil || e.send <= 0 {
		return 0, false
	}
	now := clock.Now()
	switch {
	case now.Sub(e.last) > turnPause*e.send:
		e.run, e.ended = time.Time{}, false // idle for a pause's length: the run is over
		return 0, false
	case e.ended: // the last write ended the turn, whatever else lost since
		e.run, e.ended = time.Time{}, false
		return turnPause * e.send, false
	case e.run.IsZero():
		return 0, false
	}
	length := time.Duration(turnLength)
	probing := e.rival.IsZero() || now.Sub(e.rival) > turnMemory*e.send
	if probing {
		length = time.Duration(e.probe)
	}
	return 0, now.Sub(e.run)+e.send >= max(length*e.send, turnFloor)
}

// Ended records that the write Pause said was the last of the Store's turn
// on key landed (marked, unless a merge): the next write of key pauses.
func (h *Heat) Ended(key string, clock Clock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.peek(key)
	if e == nil {
		return
	}
	now := clock.Now()
	if e.rival.IsZero() || now.Sub(e.rival) > turnMemory*e.send {
		e.probe = min(2*e.probe, probeLast) // a probe: if it draws no rival, the next comes later
	}
	e.ended = true
}

// Sent records that a write of key that lost its race took took: a
// refused send measures the service as a landed one does (Won).
func (h *Heat) Sent(key string, took time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.peek(key); e != nil && e.send > 0 {
		e.send = (3*e.send + took) / 4
	}
}

// Senior reports whether w, a write of key waiting since since (the
// start of its delivery), is the Store's senior write of the key: the one
// that has waited longest of those asking. It takes the place when it is
// free, when its holder has not asked for seniorLease, or when its holder
// started waiting later; and keeps it until it retires or another takes
// it. Only the senior write's backoff shrinks as it waits (seniority),
// and only it waits for the key's turn (handover.go): one poller per key
// and Store, however many wait.
func (h *Heat) Senior(key string, w any, since time.Time, clock Clock) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := clock.Now()
	h.rotateWindows(now)
	e := h.take(key, true)
	if e.senior != nil && e.senior != w && now.Sub(e.seniorSince) < seniorLease && !since.Before(e.seniorWait) {
		return false
	}
	e.senior, e.seniorSince, e.seniorWait = w, now, since
	return true
}

// Retire gives up w's senior place for key, if it holds it.
func (h *Heat) Retire(key string, w any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idle() {
		return
	}
	if e := h.peek(key); e != nil && e.senior == w {
		e.senior = nil
	}
}

// idle reports whether no key is known (h.mu held).
func (h *Heat) idle() bool { return len(h.cur) == 0 && len(h.old) == 0 }

// peek returns key's heat, if known (h.mu held).
func (h *Heat) peek(key string) *heat {
	if e, ok := h.cur[key]; ok {
		return e
	}
	return h.old[key]
}

// take returns key's heat moved to the current window, or a new one if
// create (h.mu held); nil when key is not known and not create.
func (h *Heat) take(key string, create bool) *heat {
	e, ok := h.cur[key]
	if ok {
		return e
	}
	if e, ok = h.old[key]; ok {
		delete(h.old, key)
	} else if !create {
		return nil
	} else {
		e = &heat{}
	}
	if h.cur == nil {
		h.cur = map[string]*heat{}
	}
	h.cur[key] = e
	return e
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
