// Package readshare shares reads among concurrent Gets of one key in one
// Store, as group commit shares writes among concurrent Updates.
package readshare

import (
	"context"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// A Get of a key no other
// Get is reading reads at once, on its own. Gets that arrive while that
// read is in flight wait for it to be answered, then share one read,
// sent then: it starts after each of them was called and is answered
// before any of them returns, so each still sees every write that ended
// before it was called (the read is linearizable for all of them). One
// read is in flight per key at a time; a hot key costs a read per round
// trip however many callers read it, where each caller would otherwise
// send its own.
//
// Each caller decodes the shared bytes into its own value. A caller whose
// context ends while it waits returns ctx.Err() alone; the shared read is
// cancelled only when every caller waiting for it has gone. A shared read
// still unsent after maxSharedWait (the read ahead of it stalled) is sent
// on its own. (Gets whose context carries write state of their own, a
// lease or a fence, and Stores with Options.DisableGroupCommit do not come
// here: they read on their own.)

// Fetch reads key for the Gets that share it; hit reports that a cached
// copy was confirmed current.
type Fetch func(ctx context.Context, key string) (it driver.Item, hit bool, err error)

// Reads is a Store's shared reads. Safe for concurrent use.
type Reads struct {
	fetch Fetch
	mu    sync.Mutex
	reads map[string]*keyReads // keys with a Get's read in flight
}

// New returns the shared reads of a Store whose reads fetch makes.
func New(fetch Fetch) *Reads { return &Reads{fetch: fetch, reads: map[string]*keyReads{}} }

// keyReads is a key's read in flight and the shared read forming behind
// it. Guarded by Reads.mu.
type keyReads struct {
	next *sharedRead // sent when the read in flight is answered; nil: none
}

// maxSharedWait bounds how long a shared read waits, unsent, for the read
// ahead of it (a stalled connection, say): then it is sent at once, and a
// second read of the key is in flight. The callers' contexts bound their own waits too.
const maxSharedWait = 100 * time.Millisecond

// sharedRead is one read several Gets wait for.
type sharedRead struct {
	ctx     context.Context // the first caller's values; done when every caller has gone
	cancel  context.CancelFunc
	waiting int         // callers waiting (guarded by Reads.mu)
	sent    bool        // sent (or dropped): no longer joinable (guarded by Reads.mu)
	timer   *time.Timer // sends it after maxSharedWait
	done    chan struct{}
	it      driver.Item
	hit     bool // the version cache's copy was current
	err     error
}

// Read reads key for a Get, sharing the read with concurrent Gets (see
// above).
func (c *Reads) Read(ctx context.Context, key string) (driver.Item, bool, error) {
	c.mu.Lock()
	kr, busy := c.reads[key]
	if !busy {
		c.reads[key] = &keyReads{}
		c.mu.Unlock()
		defer c.readAnswered(key)
		return c.fetch(ctx, key)
	}
	r := kr.next
	if r == nil {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r = &sharedRead{ctx: fctx, cancel: cancel, done: make(chan struct{})}
		r.timer = time.AfterFunc(maxSharedWait, func() { c.sendLate(key, kr, r) })
		kr.next = r
	}
	r.waiting++
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.it, r.hit, r.err
	case <-ctx.Done():
		c.stopWaiting(key, kr, r)
		return driver.Item{}, false, ctx.Err()
	}
}

// stopWaiting removes a caller whose context ended from r, dropping or
// cancelling r when nobody else waits for it.
func (c *Reads) stopWaiting(key string, kr *keyReads, r *sharedRead) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.waiting--; r.waiting > 0 {
		return
	}
	if !r.sent && c.reads[key] == kr && kr.next == r {
		kr.next = nil // dropped unsent
		r.sent = true
		r.timer.Stop()
	}
	r.cancel()
}

// readAnswered ends key's read in flight: the read forming behind it, if
// any, is sent now, and becomes the key's read in flight.
func (c *Reads) readAnswered(key string) {
	c.mu.Lock()
	kr := c.reads[key]
	r := kr.next
	if r == nil {
		delete(c.reads, key)
		c.mu.Unlock()
		return
	}
	kr.next = nil
	r.sent = true
	r.timer.Stop()
	c.mu.Unlock()
	go func() {
		c.answer(key, r)
		c.readAnswered(key)
	}()
}

// sendLate sends r, still waiting after maxSharedWait for the read ahead
// of it, on its own.
func (c *Reads) sendLate(key string, kr *keyReads, r *sharedRead) {
	c.mu.Lock()
	if r.sent {
		c.mu.Unlock()
		return
	}
	if kr.next == r {
		kr.next = nil
	}
	r.sent = true
	c.mu.Unlock()
	c.answer(key, r)
}

// answer reads key for r's callers.
func (c *Reads) answer(key string, r *sharedRead) {
	defer r.cancel()
	r.it, r.hit, r.err = c.fetch(r.ctx, key)
	close(r.done)
}
