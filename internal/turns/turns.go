// Package turns is the hot-key hand-over: the layer behind the delivery
// engine's one contention seam (engine.Contention) through which Stores
// in several processes writing one key take it in turn.
//
// A Store whose writes build on the version its last write made (group
// commit's chaining, the version cache) wins every race on a key that
// other processes also write — they must read before they write — and
// would keep the key while they starve; its own writes never lose, so it
// cannot see them. So a run of back-to-back wins on copies ends now and
// then: its last write is marked as the end of the Store's turn (meta's
// yield, naming the Store) and the Store pauses before its next write
// (hold.go), and a writer of another process that is waiting for the key
// takes it in the pause, the one that has waited longest first (wait.go);
// of a Store's writes of a key, only its senior one waits so (senior.go).
//
// The engine calls a write's part (write.go) at three points of each
// attempt: before it builds (Await: wait for the turn), before it sends
// (Dispatch: pause, mark the turn's end), after the answer (Answered: won,
// lost, how long the send took; Backoff: seniority).
package turns

import (
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/meta"
)

// Layer is a Store's hand-over: what it knows, per key, of its runs of
// wins, of other Stores' turns, and of its own waiting writes.
//
// Memory is bounded by the keys that lost races lately, and by at most
// maxRuns keys a window whose runs of wins it follows with no race lost:
// the state lives in two generations of window each, and a key not
// written for two windows is forgotten. The zero Layer is ready; safe for
// concurrent use. Its lock is held with no other, and never while the
// backend or a clock's Sleep runs.
type Layer struct {
	mu    sync.Mutex
	store string          // the Store's name in the turns' ends it marks (name)
	cur   map[string]*hot // written in this window
	old   map[string]*hot // the window before
	since time.Time       // when cur's window began
}

// hot is what the Layer knows of one key.
type hot struct {
	runOfWins   // the Store's runs of wins on copies (hold.go)
	turnsSeen   // other Stores' turns' ends read (wait.go)
	seniorPlace // the Store's longest-waiting write (senior.go)
}

const (
	window  = time.Minute
	maxRuns = 4096 // keys a window starts following on a win alone
)

// Enter is the part of a write in the hand-over (engine.Contention).
func (l *Layer) Enter(env *engine.Env, mode engine.Mode, rmw bool) engine.Contender {
	return &write{l: l, env: env, based: mode == engine.Based, rmw: rmw, began: env.Clock.Now()}
}

// name is the Store's name in the turns' ends it marks: random, short,
// made at first use.
func (l *Layer) name() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == "" {
		l.store = meta.NewID()[:nameLen]
	}
	return l.store
}

// nameLen is the length of a Store's name: 40 bits in base32.
const nameLen = 8

// mark is w marked as the last write of the turn on its key of the Store
// named store.
func mark(w engine.KeyWrite, store string) engine.KeyWrite {
	w.Meta = w.Meta.Yielding(store)
	w.Write.Meta = w.Meta.String()
	return w
}

// touch records that a write of key ended after attempts: one that took
// several starts following the key, and any keeps the key's state in the
// current window while the Store writes it. Clock is read only when some
// key is known.
func (l *Layer) touch(key string, attempts int, clock engine.Clock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if attempts <= 1 && l.idle() {
		return
	}
	l.rotateWindows(clock.Now())
	l.take(key, attempts > 1)
}

// idle reports whether no key is known (l.mu held).
func (l *Layer) idle() bool { return len(l.cur) == 0 && len(l.old) == 0 }

// peek returns key's state, if known (l.mu held).
func (l *Layer) peek(key string) *hot {
	if e, ok := l.cur[key]; ok {
		return e
	}
	return l.old[key]
}

// take returns key's state moved to the current window, or a new one if
// create (l.mu held); nil when key is not known and not create.
func (l *Layer) take(key string, create bool) *hot {
	e, ok := l.cur[key]
	if ok {
		return e
	}
	if e, ok = l.old[key]; ok {
		delete(l.old, key)
	} else if !create {
		return nil
	} else {
		e = &hot{}
	}
	if l.cur == nil {
		l.cur = map[string]*hot{}
	}
	l.cur[key] = e
	return e
}

// rotateWindows starts a new window when the current one is over; two
// windows after it was last written a key is gone.
func (l *Layer) rotateWindows(now time.Time) {
	switch {
	case l.since.IsZero():
		l.since = now
	case now.Sub(l.since) >= 2*window:
		l.cur, l.old, l.since = nil, nil, now // idle for a whole window: all forgotten
	case now.Sub(l.since) >= window:
		l.cur, l.old, l.since = nil, l.cur, now
	}
}

// holds reports whether the Store holds key: etag, the version read, is
// the one its last write made. Its own writes that lose then lost to its
// own and retry as any lost race does: no other Store's turn is to end
// before theirs.
func (l *Layer) holds(key string, etag driver.ETag) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.peek(key)
	return e != nil && etag != "" && e.wrote == etag
}
