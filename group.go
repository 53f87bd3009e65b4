package etagstore

import (
	"context"
	"errors"
	"sync"
)

// Group commit: concurrent Updates of one key in one Store share one read
// and one conditional write. Requests queue per key; one caller at a time
// leads: it takes every queued request, reads the document once, applies
// each mutation in arrival order to a private copy (a failing mutation is
// dropped and fails only its own caller), writes the result once with
// If-Match, and retries the whole batch on 412. Each caller returns after
// the write that holds its mutation committed, with that version. When the
// leader's batch is done, the first request queued meanwhile leads the next
// one, so no caller waits for more than its own batch and the one before.

type groupKey struct {
	key    string
	create bool
}

type group[T any] struct {
	queue   []*request[T]
	running bool
}

type request[T any] struct {
	ctx     context.Context
	mutate  func(*T) error
	taken   bool          // in a batch (guarded by Store.gmu)
	promote chan struct{} // closed to make this request's caller lead
	done    chan struct{} // closed when doc and err are set
	doc     Doc[T]
	err     error
}

// errNoneApplied aborts a batch whose every mutation failed.
var errNoneApplied = errors.New("etagstore: no mutation in the batch applied")

// updateGrouped runs an Update through its key's group.
func (s *Store[T]) updateGrouped(ctx context.Context, key string, create bool, mutate func(*T) error) (Doc[T], error) {
	if err := ctx.Err(); err != nil {
		return Doc[T]{}, err
	}
	k := groupKey{key, create}
	req := &request[T]{ctx: ctx, mutate: mutate, promote: make(chan struct{}), done: make(chan struct{})}
	s.gmu.Lock()
	g := s.groups[k]
	if g == nil {
		g = &group[T]{}
		s.groups[k] = g
	}
	g.queue = append(g.queue, req)
	lead := !g.running
	g.running = true
	s.gmu.Unlock()
	if lead {
		s.lead(k, g)
	}
	promote := req.promote // nil once this caller has led: a closed channel stays ready
	for {
		select {
		case <-req.done:
			return req.doc, req.err
		case <-promote:
			promote = nil
			s.lead(k, g)
		case <-ctx.Done():
			s.gmu.Lock()
			select {
			case <-promote: // it must lead all the same, or the queue stalls
				s.gmu.Unlock()
				promote = nil
				s.lead(k, g)
				continue
			default:
			}
			taken := req.taken
			if !taken {
				for i, r := range g.queue {
					if r == req {
						g.queue = append(g.queue[:i], g.queue[i+1:]...)
						break
					}
				}
			}
			s.gmu.Unlock()
			if !taken {
				return Doc[T]{}, ctx.Err()
			}
			select {
			case <-req.done: // finished at the same moment
				return req.doc, req.err
			default:
			}
			return Doc[T]{}, outcomeUnknown("Update", key, ctx.Err()) // its batch is being written
		}
	}
}

// lead commits one batch of k's queue, then hands the lead to the first
// request queued meanwhile, or ends the group.
func (s *Store[T]) lead(k groupKey, g *group[T]) {
	s.gmu.Lock()
	batch := g.queue
	g.queue = nil
	for _, r := range batch {
		r.taken = true
	}
	s.gmu.Unlock()
	if len(batch) > 0 {
		s.commitBatch(k, batch)
	}
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if len(g.queue) == 0 {
		g.running = false
		delete(s.groups, k)
		return
	}
	close(g.queue[0].promote)
}

// commitBatch writes the mutations of batch in one read-modify-write.
func (s *Store[T]) commitBatch(k groupKey, batch []*request[T]) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	errs := make([]error, len(batch))
	doc, err := s.readModifyWrite(ctx, k.key, k.create, nil, func(cur Doc[T]) (T, error) {
		if len(batch) == 1 {
			v := cur.Value // a fresh decode: mutate cannot touch a shared value
			errs[0] = batch[0].mutate(&v)
			return v, errs[0]
		}
		v := cur.Value
		applied := 0
		for i, r := range batch {
			// Each mutation works on its own copy, so that a failing one
			// leaves no trace in the others'.
			data, err := s.codec.Marshal(v)
			if err != nil {
				return v, err
			}
			var c T
			if err := s.codec.Unmarshal(data, &c); err != nil {
				return v, err
			}
			if errs[i] = r.mutate(&c); errs[i] == nil {
				v = c
				applied++
			}
		}
		if applied == 0 {
			return v, errNoneApplied
		}
		return v, nil
	})
	for i, r := range batch {
		switch {
		case errs[i] != nil:
			r.err = errs[i]
		case errors.Is(err, errNoneApplied):
			r.err = errs[i]
		default:
			r.doc, r.err = doc, err
		}
		close(r.done)
	}
}

// batchContext returns a context for a batch's requests: done when every
// caller's context is done (one caller giving up does not stop the others'
// write), carrying the values of the first.
func batchContext[T any](batch []*request[T]) (context.Context, context.CancelFunc) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var mu sync.Mutex
	live := len(batch)
	stops := make([]func() bool, len(batch))
	for i, r := range batch {
		stops[i] = context.AfterFunc(r.ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if live--; live == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
