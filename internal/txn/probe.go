package txn

import (
	"context"
	"sync/atomic"

	"github.com/etagstore/etagstore/driver"
)

// This file reads the keys a batch's members create unread that their
// Stores' version caches hold (most likely taken: answerLikely). Each
// such member leaves the batch, and its caller learns whether its key
// exists beside the batch's commit, not before it. The keys of one
// batch's such members are read together, in one request where the
// backend can (ReadMany: on tables one query per 14 keys), by the first
// of their callers to ask; the others wait for that read. A caller that
// finds the shared read failed, or whose context ends first, reads its
// key on its own.

// probes is one shared read of the keys of a batch's members answered
// likely.
type probes struct {
	keys    []string
	cores   []Store // each key's Store: the read is noted in its version cache
	read    func(ctx context.Context, keys []string) ([]driver.Item, error)
	started atomic.Bool
	done    chan struct{} // closed when found and err are set
	found   map[string]bool
	err     error
}

// newProbes is the shared read of keys (each of the Store of the same
// index in cores) through read, nil when there are fewer than two keys
// (one key: its caller reads it as soon).
func newProbes(keys []string, cores []Store, read func(context.Context, []string) ([]driver.Item, error)) *probes {
	if len(keys) < 2 || read == nil {
		return nil
	}
	return &probes{keys: keys, cores: cores, read: read, done: make(chan struct{})}
}

// exists reports whether key is stored, as the shared read found it: the
// first caller to ask reads every key, on ctx; the others wait. ok is
// false when no answer came (the read failed, or ctx ended first).
func (p *probes) exists(ctx context.Context, key string) (exists, ok bool) {
	if p.started.CompareAndSwap(false, true) {
		p.run(ctx)
	} else {
		select {
		case <-p.done:
		case <-ctx.Done():
			return false, false
		}
	}
	if p.err != nil {
		return false, false
	}
	return p.found[key], true
}

func (p *probes) run(ctx context.Context) {
	defer close(p.done)
	items, err := p.read(ctx, p.keys)
	if err != nil {
		p.err = err
		return
	}
	p.found = make(map[string]bool, len(items))
	for i, it := range items {
		var missing error
		if it.ETag == "" {
			missing = driver.Errorf(driver.ErrNotFound, "%q", p.keys[i])
		}
		p.found[p.keys[i]] = p.cores[i].Noted(p.keys[i], it, missing).Stored()
	}
}

// probe reports whether key, which r's transaction creates unread, is
// stored (a commit conditioned on its absence would be refused): as
// shared finds it, when given and it answers, or read through key's
// Store.
func (r *member) probe(key string, shared *probes) (bool, error) {
	if shared != nil {
		if exists, ok := shared.exists(r.call.ctx, key); ok {
			return exists, nil
		}
	}
	s := r.owner(key)
	v, err := s.Read(r.call.ctx, key)
	if err != nil {
		return false, err
	}
	return v.Stored(), nil
}

// owner is the Store r's transaction wrote key through.
func (r *member) owner(key string) Store {
	if s := r.view.owner[key]; s != nil {
		return s
	}
	return r.call.lead
}
