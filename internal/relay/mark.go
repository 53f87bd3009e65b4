package relay

import (
	"context"
	"sync/atomic"

	"github.com/etagstore/etagstore/driver"
)

// This file marks a partition's published events sent behind its
// publishes.

// markBatch is how many published events one request marks sent at most:
// each moves (a delete and a create) beside the cursor, within a table's
// 100 actions.
const markBatch = 32

// marker marks a partition's published events sent behind its
// publishes, markBatch to a request, one request at a time and in
// order, on a goroutine of its own. A mark that fails stops it: an event
// marked past an unmarked one would move the cursor past it.
type marker[V any] struct {
	records Records[V]
	ctx     context.Context
	scope   string
	given   int                // run[:given] is queued
	jobs    chan []driver.Item // nil until the first
	done    chan struct{}
	failed  atomic.Bool
	n       int // marked, once done
	err     error
}

func (r *Relay[V]) marker(ctx context.Context, scope string) *marker[V] {
	return &marker[V]{records: r.Records, ctx: ctx, scope: scope, done: make(chan struct{})}
}

// upTo queues published, the run's first events (a prefix that grows
// from call to call), markBatch at a time; all of the rest when last. It
// reports whether marking goes on (false once a mark failed).
func (m *marker[V]) upTo(published []driver.Item, last bool) bool {
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

func (m *marker[V]) mark() {
	defer close(m.done)
	for events := range m.jobs {
		if m.err != nil {
			continue
		}
		moved, err := m.records.MarkSent(m.ctx, m.scope, events)
		if m.n += moved; err != nil {
			m.err = err
			m.failed.Store(true)
		}
	}
}

// wait waits for the marks queued and returns how many events they
// marked (not those another relay had marked first), and the error of
// the one that failed.
func (m *marker[V]) wait() (int, error) {
	if m.jobs == nil {
		return 0, nil
	}
	close(m.jobs)
	<-m.done
	return m.n, m.err
}
