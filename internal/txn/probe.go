package txn

import (
	"context"
	"sync/atomic"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/index"
)

// This file settles, beside a batch's commit, what the batch predicted
// without reading: the keys its members create unread that their
// Stores' version caches hold (most likely taken: answerLikely), and the
// unique values its members take whose entries their Stores wrote lately
// (most likely held: deferTakers). Each such member leaves the batch on
// the prediction, and its caller learns whether it holds. What the
// batch's such members need is read together, in one request where the
// backend can (ReadMany: on tables one query per 14 keys), by the first
// of their callers to ask; the others wait for that read. A caller that
// finds the shared read failed, or whose context ends first, learns on
// its own.

// shared is one read several callers need: the first to ask makes it, on
// its own context; the others wait for it.
type shared[V any] struct {
	read    func(ctx context.Context) (V, error)
	started atomic.Bool
	done    chan struct{} // closed when val and err are set
	val     V
	err     error
}

func newShared[V any](read func(ctx context.Context) (V, error)) *shared[V] {
	return &shared[V]{read: read, done: make(chan struct{})}
}

// get returns what the read found; ok is false when it found nothing (it
// failed, or ctx ended before it did).
func (s *shared[V]) get(ctx context.Context) (v V, ok bool) {
	if ctx.Err() == nil && s.started.CompareAndSwap(false, true) { // (a caller already gone leaves the read to another)
		s.val, s.err = s.read(ctx)
		close(s.done)
	} else {
		select {
		case <-s.done:
		case <-ctx.Done():
			return v, false
		}
	}
	return s.val, s.err == nil
}

// probes is the shared read of the keys of a batch's members answered
// likely: whether each is stored.
type probes = shared[map[string]bool]

// newProbes is the shared read of keys (each of the Store of the same
// index in cores) through read, noted in each Store's version cache; nil
// when there are fewer than two keys (one key: its caller reads it as
// soon).
func newProbes(keys []string, cores []Store, read func(context.Context, []string) ([]driver.Item, error)) *probes {
	if len(keys) < 2 || read == nil {
		return nil
	}
	return newShared(func(ctx context.Context) (map[string]bool, error) {
		items, err := read(ctx, keys)
		if err != nil {
			return nil, err
		}
		found := make(map[string]bool, len(items))
		for i, it := range items {
			var missing error
			if it.ETag == "" {
				missing = driver.Errorf(driver.ErrNotFound, "%q", keys[i])
			}
			found[keys[i]] = cores[i].Noted(keys[i], it, missing).Stored()
		}
		return found, nil
	})
}

// probe reports whether key, which r's transaction creates unread, is
// stored (a commit conditioned on its absence would be refused): as
// shared finds it, when given and it answers, or read through key's
// Store.
func (r *member) probe(key string, shared *probes) (bool, error) {
	if shared != nil {
		if found, ok := shared.get(r.call.ctx); ok {
			return found[key], nil
		}
	}
	v, err := r.owner(key).Read(r.call.ctx, key)
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

// confirms is the shared read of the unique values a batch's members
// take that Pending predicted held (index.Likely): for each prediction,
// the definite error when another document holds its value now, nil
// when it is free.
type confirms = shared[map[*index.UniqueError]*index.UniqueError]

// newConfirms is the shared read of predictions es (index.Confirm).
func newConfirms(es []*index.UniqueError) *confirms {
	return newShared(func(ctx context.Context) (map[*index.UniqueError]*index.UniqueError, error) {
		held, err := index.Confirm(ctx, es)
		if err != nil {
			return nil, err
		}
		out := make(map[*index.UniqueError]*index.UniqueError, len(es))
		for i, e := range es {
			out[e] = held[i]
		}
		return out, nil
	})
}

// held is the definite error of r's predicted taker e (its write takes a
// value another document holds now), as shared finds it; nil when the
// value is free, or nothing was found: r's transaction then runs on its
// own, where its own delivery reads what it needs.
func (r *member) held(e *index.UniqueError, shared *confirms) *index.UniqueError {
	if shared == nil {
		return nil
	}
	found, ok := shared.get(r.call.ctx)
	if !ok {
		return nil
	}
	return found[e]
}
