package turns

import (
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// This file is the holder's side: a Store's run of back-to-back wins on a
// key from copies, the pause that ends it, and the write marked as the
// end of its turn.
//
// While there is a sign of rivals (the Store lost a race on the key
// within turnMemory sends) a turn ends every turnLength sends, and the
// pause lasts turnPause sends. Without one, a run ends once after
// probeFirst sends, and then after twice as many each time the pause drew
// no rival: a lone writer pays a pause now and then, less and less often,
// and a rival that started while the key was held gets its first turn
// within probeFirst sends. A turn lasts at least turnFloor: where sends
// are fast (Azurite on loopback) shorter turns would spend the service on
// hand-overs.

// runOfWins is what the Store knows of its own writes of a key.
type runOfWins struct {
	rival time.Time     // the last sign of a rival writer
	run   time.Time     // when the current run of back-to-back wins began (zero: none)
	last  time.Time     // the last win
	send  time.Duration // how long a write of the key takes (moving average)
	probe int           // sends before the next pause without a sign of rivals
	ended bool          // the last write ended the Store's turn: pause before the next
	wrote driver.ETag   // the version the Store's last write of the key made (won)
}

const (
	turnLength = 5                      // sends a run of wins lasts before it pauses
	turnPause  = handoverClasses + 1    // the pause, in sends: a read for each class of waiting writers, and their write (wait.go)
	turnMemory = 100                    // sends after the last sign of a rival that turns go on
	probeFirst = 128                    // sends a run without a sign of rivals lasts before it pauses
	turnFloor  = 100 * time.Millisecond // the shortest turn, at any latency
	probeLast  = 1 << 16
)

// rival records that a write of key lost a race (a 412, a copy found
// stale, a read changed under a transaction): another writer is there,
// and the Store takes turns (pause). A write retried only because it was
// throttled or its answer was lost is no sign of one.
func (l *Layer) rival(key string, clock engine.Clock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := clock.Now()
	l.rotateWindows(now)
	e := l.take(key, true)
	e.rival, e.run, e.probe = now, time.Time{}, probeFirst // a new run starts at the next win
}

// won records a write of key that landed after a send that took took,
// making version etag ("": not known; see holds); copy says it was
// built on a copy (a version not read during its call). Clock is read
// only when the key is known or copy.
func (l *Layer) won(key string, took time.Duration, copy bool, etag driver.ETag, clock engine.Clock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !copy && l.idle() {
		return
	}
	e := l.peek(key)
	if e == nil && !copy {
		return
	}
	now := clock.Now()
	if e == nil {
		l.rotateWindows(now)
		if len(l.cur) >= maxRuns {
			return // following enough keys: one that loses a race is followed then
		}
		e = l.take(key, true)
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

// pause says, before a write of key built on a copy is sent, how long it
// waits first and whether it is the last of the Store's turn (marked so,
// for the processes waiting for the key). A run of back-to-back wins ends
// with the write sent once it has lasted turnLength sends less one (with
// a sign of rivals) or the probe's length (without), and at least
// turnFloor; once ended says that write was sent, the write after it
// waits turnPause sends, and the run starts again. Otherwise zero and
// false.
func (l *Layer) pause(key string, clock engine.Clock) (wait time.Duration, last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idle() {
		return 0, false
	}
	e := l.peek(key)
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

// ended records that the write pause said was the last of the Store's
// turn on key landed (marked, unless a merge): the next write of key
// pauses.
func (l *Layer) ended(key string, clock engine.Clock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.peek(key)
	if e == nil {
		return
	}
	now := clock.Now()
	if e.rival.IsZero() || now.Sub(e.rival) > turnMemory*e.send {
		e.probe = min(2*e.probe, probeLast) // a probe: if it draws no rival, the next comes later
	}
	e.ended = true
}

// sent records that a write of key that lost its race took took: a
// refused send measures the service as a landed one does (won).
func (l *Layer) sent(key string, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.peek(key); e != nil && e.send > 0 {
		e.send = (3*e.send + took) / 4
	}
}
