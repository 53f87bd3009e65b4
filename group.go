package etagstore

import (
	"context"

	"github.com/etagstore/etagstore/internal/telemetry"
)

// Group commit for Updates (see package internal/updategroup): concurrent
// Updates of one key in one Store share one read and one conditional
// write, and each caller still gets the state right after its own
// mutation, its own errors and its own deadline. This file is the Store's
// side: the way in, and the typed work the group does through the Store.

// updateGrouped runs an Update through its key's group: as its first
// caller, on its own (telling the group when mutate runs); otherwise
// queued, its mutate applied in a batch's slot on this goroutine.
func (s *Store[T]) updateGrouped(ctx context.Context, key string, create bool, mutate func(*T) error, st *telemetry.Stats) (Doc[T], error) {
	first, r := s.groups.Arrive(ctx, adapter[T]{s}, key, create, mutate)
	if first != nil {
		defer first.Done()
		return s.updateUngrouped(ctx, key, create, mutate, first, st)
	}
	res := r.Served(ctx)
	switch {
	case res.Ungrouped && res.Self != nil:
		return Doc[T]{}, res.Self // its mutate wrote the key: running it again would write again
	case res.Ungrouped:
		return s.updateUngrouped(ctx, key, create, mutate, nil, st)
	}
	st.Attempts, st.Batch = res.Attempts, res.Batch
	if res.Err != nil {
		return Doc[T]{}, res.Err
	}
	d := s.idx.dated(Doc[T]{Key: key, Value: res.Value, ETag: res.ETag, Extra: res.Extra})
	if res.Superseded {
		d.Extra = Extra{res.Extra.x.Superseded(res.ETag, res.Data)} // its own state, not the version written
	}
	return d, nil
}
