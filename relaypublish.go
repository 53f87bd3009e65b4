package etagstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/etagstore/etagstore/driver"
)

// This file is how a relay pass moves through one partition's run of
// events: calls of the publisher handed out in order, a batch each and
// a window of them at a time, and the published events marked sent
// behind them.

// batches is a relay's publisher: publish takes up to size consecutive
// events of one partition at a time (Relay's: one, by singly).
type batches[E any] struct {
	publish func(context.Context, []Event[E]) error
	size    int
}

// singly is publish as a publisher of batches of one.
func singly[E any](publish func(context.Context, Event[E]) error) batches[E] {
	return batches[E]{func(ctx context.Context, evs []Event[E]) error { return publish(ctx, evs[0]) }, 1}
}

// inOrder publishes evs in order, a batch of up to p.size at a call, and
// inFlight calls at once at most: the calls are handed out in order
// (with more than one in flight, their goroutines may enter publish in
// any order), and one more is handed out as one in flight lands. progress(k) is
// called each time the first k events have all landed (k grows); when
// it returns false, or a call fails, no more start. It returns how many
// events, from the first, landed before the first call that failed, and
// that call's error. With inFlight 1 every call runs on the caller's
// goroutine, one after another.
func (p batches[E]) inOrder(ctx context.Context, evs []Event[E], inFlight int, progress func(k int) bool) (int, error) {
	var units [][]Event[E]
	for rest := evs; len(rest) > 0; {
		n := min(len(rest), p.size)
		units = append(units, rest[:n:n]) // full: a publisher that appends to its batch copies it
		rest = rest[n:]
	}
	ends := make([]int, len(units)+1) // ends[k]: the events of units[:k]
	for i, u := range units {
		ends[i+1] = ends[i] + len(u)
	}
	k, err := p.unitsInOrder(ctx, units, inFlight, func(k int) bool { return progress(ends[k]) })
	return ends[k], err
}

func (p batches[E]) unitsInOrder(ctx context.Context, units [][]Event[E], inFlight int, progress func(k int) bool) (int, error) {
	if inFlight <= 1 {
		for i, u := range units {
			if err := callPublish(ctx, p.publish, u); err != nil {
				return i, err
			}
			if !progress(i + 1) {
				return i + 1, nil
			}
		}
		return len(units), nil
	}
	return p.window(ctx, units, inFlight, progress)
}

// window is unitsInOrder with more than one call in flight: a window of
// inFlight calls that slides past each one that lands.
func (p batches[E]) window(ctx context.Context, units [][]Event[E], inFlight int, progress func(k int) bool) (int, error) {
	type result struct {
		i   int
		err error
	}
	results := make(chan result, inFlight)
	landed := make([]bool, len(units))
	next, prefix, running, stop := 0, 0, 0, false
	failAt, failErr := len(units), error(nil)
	for {
		for ; !stop && running < inFlight && next < len(units); next, running = next+1, running+1 {
			go func(i int) { results <- result{i, callPublish(ctx, p.publish, units[i])} }(next)
		}
		if running == 0 {
			return prefix, failErr
		}
		r := <-results
		running--
		if r.err != nil {
			stop = true
			if r.i < failAt {
				failAt, failErr = r.i, r.err
			}
			continue
		}
		landed[r.i] = true
		was := prefix
		for prefix < failAt && landed[prefix] {
			prefix++
		}
		if prefix > was && !stop && !progress(prefix) {
			stop = true
		}
	}
}

// callPublish is publish(ctx, evs); a panic in it is its error.
func callPublish[E any](ctx context.Context, publish func(context.Context, []Event[E]) error, evs []Event[E]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("publish panicked: %s", strings.Join(strings.Fields(fmt.Sprint(r)), " ")) // one line
		}
	}()
	return publish(ctx, evs)
}

// marker marks a partition's published events sent behind its
// publishes, markBatch to a request, one request at a time and in
// order, on a goroutine of its own. A mark that fails stops it: an event
// marked past an unmarked one would move the cursor past it.
type marker[E any] struct {
	o      *Outbox[E]
	ctx    context.Context
	scope  string
	given  int                // run[:given] is queued
	jobs   chan []driver.Item // nil until the first
	done   chan struct{}
	failed atomic.Bool
	n      int // marked, once done
	err    error
}

func (o *Outbox[E]) marker(ctx context.Context, scope string) *marker[E] {
	return &marker[E]{o: o, ctx: ctx, scope: scope, done: make(chan struct{})}
}

// upTo queues published, the run's first events (a prefix that grows
// from call to call), markBatch at a time; all of the rest when last. It
// reports whether marking goes on (false once a mark failed).
func (m *marker[E]) upTo(published []driver.Item, last bool) bool {
	for len(published)-m.given >= markBatch || last && len(published) > m.given {
		k := min(len(published)-m.given, markBatch)
		if m.jobs == nil {
			m.jobs = make(chan []driver.Item, cap(published)/markBatch+2)
			go m.mark()
		}
		m.jobs <- published[m.given : m.given+k]
		m.given += k
	}
	return !m.failed.Load()
}

func (m *marker[E]) mark() {
	defer close(m.done)
	for events := range m.jobs {
		if m.err != nil {
			continue
		}
		moved, err := m.o.markSent(m.ctx, m.scope, events)
		if m.n += moved; err != nil {
			m.err = err
			m.failed.Store(true)
		}
	}
}

// wait waits for the marks queued and returns how many events they
// marked (not those another relay had marked first), and the error of
// the one that failed.
func (m *marker[E]) wait() (int, error) {
	if m.jobs == nil {
		return 0, nil
	}
	close(m.jobs)
	<-m.done
	return m.n, m.err
}
