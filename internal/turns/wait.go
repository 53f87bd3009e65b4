package turns

import (
	"context"
	"time"

	"github.com/etagstore/etagstore/internal/engine"
)

// This file is the waiter's side of the hand-over of a key that Stores in
// several processes write, taking turns: the Store holding the key marks
// the last write of its turn (meta's yield) and pauses (hold.go); the
// Stores waiting for the key read it until they see the turn end, and the
// one that has waited longest writes first.
//
// Waiting Stores cannot tell each other how long they have waited, so the
// order is kept by timing alone. A waiter (its Store's senior write of the
// key, after a lost race, while the key's writers take turns) reads the
// key back to back, a read a send at most. Each turn's end names the
// Store whose turn it ends, so a waiter knows the other Stores taking
// turns lately; those whose turns it has not seen end since it started
// waiting, other than the holder, lost the key before it and wait ahead
// of it. Its class is handoverClasses-1 less the Stores ahead of it (not
// below the turns' time it has waited, less half a turn). On reading a
// version that ends a turn it writes at once in the top class, and
// otherwise once one more read per class below the top has found the key
// unchanged. A read takes about a send, and the holder pauses turnPause
// sends, a read for each class and one for the write, so every class's
// write lands in the pause, each a read after the class above: the key
// goes round the Stores in the order they lost it, and the one that is
// alone in waiting takes it at once. A version that does not end a turn
// (a writer that stopped, or an older library's) is taken after two reads
// more than a marked one; and a waiter that has read for two turns' time
// writes anyway, and waits for the next turn's end if it loses.
//
// Only a Store that read another Store's turn's end lately waits so, and
// not while it holds the key itself (the version read is the one its last
// write made): its writes that lose then lost to its own (several Updates
// of one key with DisableGroupCommit), and retry as any lost race does. A
// waiter that an older write of its Store displaces from the senior place
// backs off, and leaves the wait to the older one.
//
// Reads back to back cost a request per send per waiting Store, which
// earns its keep where a send takes handoverMinSend or more (storage in
// another region, or a service under load); where sends are faster the
// waiters retry as any lost race does.
const (
	handoverClasses = 3
	handoverMinSend = 5 * time.Millisecond
	handoverMaxWait = 2 // turns' time a waiter reads before it writes anyway
)

// turnsSeen is what the Store read of other Stores' turns' ends of a key.
type turnsSeen struct {
	yield time.Time // when the Store last read another Store's turn's end of the key
	// holders are the other Stores whose turns' ends the Store read
	// lately, by name: when it read the last.
	holders map[string]time.Time
}

// awaitTurn is the read base of a write d that lost a race on a key whose
// writers take turns, made its Store's senior write of the key: it reads
// again until the key's holder hands it over, as the file's comment says,
// within the policy's MaxElapsedTime, and returns the version to write
// over. Otherwise it returns base. A wait that lasted a send or more
// stands for the backoff after the write, if it loses (awaited).
func (w *write) awaitTurn(ctx context.Context, d *engine.Delivery, base []engine.Version) ([]engine.Version, error) {
	if len(base) != 1 {
		return base, nil
	}
	key := d.Key()
	send, ok := w.waitsTurn(key, base[0])
	if !ok {
		return base, nil
	}
	clock := w.env.Clock
	class := w.class(key, base[0], send)
	start := clock.Now()
	defer func() { w.awaited = clock.Now().Sub(start) >= send }()
	read := start.Add(-send) // when the last read began (the base's, about a send ago)
	for same := 0; ; {
		last := base[0]
		if w.handedOver(last, same, class) || !w.inTime(start, send) {
			return base, nil
		}
		if !w.senior(key) {
			return nil, engine.ErrDisplaced // an older write of the Store waits for the key: it backs off
		}
		cur, err := w.readPaced(ctx, d, &read, send)
		if err != nil {
			return nil, err
		}
		if cur[0].Exists == last.Exists && cur[0].ETag == last.ETag {
			same++
			continue
		}
		base, same = cur, 0
		if !cur[0].Exists || w.l.holds(key, cur[0].ETag) {
			return base, nil // deleted, or another write of its Store took it: no turn to wait for
		}
		if w.sawTurnEnd(key, cur[0]) {
			class = w.class(key, cur[0], send)
		}
	}
}

// waitsTurn reports whether a write of key whose base read found v waits
// for its turn, and how long a send takes: it lost a race, v exists, a
// send takes handoverMinSend or more, its Store read another Store's
// turn's end lately and does not hold the key (v is not its own last
// write), and it is its Store's senior write of the key.
func (w *write) waitsTurn(key string, v engine.Version) (time.Duration, bool) {
	if !w.lost || !v.Exists {
		return 0, false // a missing key has no holder to hand it over
	}
	w.sawTurnEnd(key, v)
	send := w.l.sendOf(key)
	return send, send >= handoverMinSend && w.l.turning(key, w.env.Clock) && !w.l.holds(key, v.ETag) && w.senior(key)
}

// readPaced reads d's key a send at most after the last read began
// (*last, moved on to this one's start).
func (w *write) readPaced(ctx context.Context, d *engine.Delivery, last *time.Time, send time.Duration) ([]engine.Version, error) {
	if wait := send - w.env.Clock.Now().Sub(*last); wait > 0 {
		if err := w.env.Clock.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
	*last = w.env.Clock.Now()
	return d.Read(ctx)
}

// handedOver reports whether a waiter of class may write over v, having
// read it same more times since, unchanged: as many reads as classes
// below the top after a turn's end, two more after a version that does
// not end a turn.
func (w *write) handedOver(v engine.Version, same, class int) bool {
	need := handoverClasses - 1 - class
	if !w.endsTurn(v) {
		need += 2
	}
	return same >= need
}

// inTime reports whether a write waiting for its turn since start may
// read again: it has waited less than handoverMaxWait turns, and a read
// and its write still fit in the policy's MaxElapsedTime.
func (w *write) inTime(start time.Time, send time.Duration) bool {
	now := w.env.Clock.Now()
	if now.Sub(start) >= handoverMaxWait*cycle(send) {
		return false
	}
	limit := w.env.Policy.MaxElapsedTime
	return limit <= 0 || now.Add(2*send).Sub(w.began) <= limit
}

// class is the class of the write waiting for v's writer to hand its key
// over, from the top (handoverClasses-1) down by the Stores waiting ahead
// of it: of the other Stores whose turns' ends its Store read lately, all
// but the holder and those whose turns it has seen end while waiting (not
// v's own). A write that has waited longer than that many turns (less
// half a turn) is not put below its wait.
func (w *write) class(key string, v engine.Version, send time.Duration) int {
	seen := w.turnEnds
	if w.endsTurn(v) {
		seen-- // the end being handed over is not one it waited through
	}
	ahead := w.l.holders(key, w.env.Clock) - 1 - seen
	top := handoverClasses - 1
	c := cycle(send)
	byTime := int((w.env.Clock.Now().Sub(w.began) - c/2) / c)
	return min(max(top-max(ahead, 0), byTime, 0), top)
}

// sawTurnEnd counts v when it is a version not seen before that ends
// another Store's turn, tells the Layer (the key's writers take turns,
// and who), and reports whether it did.
func (w *write) sawTurnEnd(key string, v engine.Version) bool {
	if !w.endsTurn(v) || v.ETag == w.turnEnd {
		return false
	}
	w.turnEnds++
	w.turnEnd = v.ETag
	w.l.turnEnded(key, v.Meta.Yield, w.env.Clock)
	return true
}

// endsTurn reports whether v was written as the last of another Store's
// turn.
func (w *write) endsTurn(v engine.Version) bool {
	return v.Exists && v.Meta.Yield != "" && v.Meta.Yield != w.l.name()
}

// sendOf is how long a write of key has taken the Store lately (zero: not
// known).
func (l *Layer) sendOf(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.peek(key); e != nil {
		return e.send
	}
	return 0
}

// turnEnded records that a read found a version of key that ended the
// turn of the Store named holder.
func (l *Layer) turnEnded(key, holder string, clock engine.Clock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := clock.Now()
	l.rotateWindows(now)
	e := l.take(key, true)
	e.yield = now
	if e.holders == nil {
		e.holders = map[string]time.Time{}
	}
	e.holders[holder] = now
	if len(e.holders) > maxHolders {
		oldest := holder
		for name, at := range e.holders {
			if at.Before(e.holders[oldest]) {
				oldest = name
			}
		}
		delete(e.holders, oldest)
	}
}

// holders is how many other Stores the Store has read a turn's end of key
// from within the last holdersRemembered turns' time.
func (l *Layer) holders(key string, clock engine.Clock) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.peek(key)
	if e == nil {
		return 0
	}
	n, now := 0, clock.Now()
	for _, at := range e.holders {
		if now.Sub(at) < holdersRemembered*cycle(e.send) {
			n++
		}
	}
	return n
}

const (
	maxHolders        = 16 // other Stores a key's state names at most
	holdersRemembered = 16 // turns' time a Store counts another as a holder of a key after its last turn's end
)

// turning reports whether the writers of key take turns: the Store read
// another Store's turn's end within the last turnsRemembered turns' time.
func (l *Layer) turning(key string, clock engine.Clock) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idle() {
		return false
	}
	e := l.peek(key)
	return e != nil && !e.yield.IsZero() && clock.Now().Sub(e.yield) < turnsRemembered*cycle(e.send)
}

// turnsRemembered is how many turns' time after it last saw a turn end a
// Store stops waiting for the next.
const turnsRemembered = 4

// cycle is how long a turn and its hand-over take where a send takes send.
func cycle(send time.Duration) time.Duration {
	return max(turnLength*send, turnFloor) + 2*send
}
