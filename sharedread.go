package etagstore

import (
	"context"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// Shared reads: concurrent Gets of one key in one Store share reads, as
// concurrent Updates share writes (group commit). A Get of a key no other
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
// on its own. Gets whose
// context carries write state of their own (a lease: driver.Ungrouped, or
// a fence) and Stores with Options.DisableGroupCommit read on their own.

// keyReads is a key's read in flight and the shared read forming behind
// it. Guarded by Store.rmu.
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
	waiting int         // callers waiting (guarded by Store.rmu)
	sent    bool        // sent (or dropped): no longer joinable (guarded by Store.rmu)
	timer   *time.Timer // sends it after maxSharedWait
	done    chan struct{}
	it      driver.Item
	hit     bool // the version cache's copy was current
	err     error
}

// readShared reads key for a Get, sharing the read with concurrent Gets
// when it can (see above).
func (c *core) readShared(ctx context.Context, key string) (driver.Item, bool, error) {
	if !c.shareReads || isUngrouped(ctx) {
		return c.fetch(ctx, key)
	}
	c.rmu.Lock()
	kr, busy := c.reads[key]
	if !busy {
		c.reads[key] = &keyReads{}
		c.rmu.Unlock()
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
	c.rmu.Unlock()
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
func (c *core) stopWaiting(key string, kr *keyReads, r *sharedRead) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
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
func (c *core) readAnswered(key string) {
	c.rmu.Lock()
	kr := c.reads[key]
	r := kr.next
	if r == nil {
		delete(c.reads, key)
		c.rmu.Unlock()
		return
	}
	kr.next = nil
	r.sent = true
	r.timer.Stop()
	c.rmu.Unlock()
	go func() {
		c.answer(key, r)
		c.readAnswered(key)
	}()
}

// sendLate sends r, still waiting after maxSharedWait for the read ahead
// of it, on its own.
func (c *core) sendLate(key string, kr *keyReads, r *sharedRead) {
	c.rmu.Lock()
	if r.sent {
		c.rmu.Unlock()
		return
	}
	if kr.next == r {
		kr.next = nil
	}
	r.sent = true
	c.rmu.Unlock()
	c.answer(key, r)
}

// answer reads key for r's callers.
func (c *core) answer(key string, r *sharedRead) {
	defer r.cancel()
	r.it, r.hit, r.err = c.fetch(r.ctx, key)
	close(r.done)
}

// fetch reads key: from the version cache when the backend confirms the
// copy kept is current (ReadIfChanged), else from the backend. hit
// reports the former.
func (c *core) fetch(ctx context.Context, key string) (it driver.Item, hit bool, err error) {
	if cached, ok := c.cache.get(key); ok {
		if revalidate := c.abilities.ReadIfChanged; revalidate != nil {
			it, changed, err := revalidate(ctx, key, cached.ETag)
			switch {
			case err == nil && !changed:
				return cached, true, nil // still current: nothing downloaded
			case err == nil:
				c.cache.put(key, it)
				return it, false, nil
			}
			c.cache.note(key, it, err)
			return driver.Item{}, false, err
		}
	}
	it, err = c.b.Read(ctx, key)
	c.cache.note(key, it, err)
	return it, false, err
}

// readers is the shared-read state of a core.
type readers struct {
	shareReads bool
	rmu        sync.Mutex
	reads      map[string]*keyReads // keys with a Get's read in flight
}
