package tablestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
)

// Merge writes only the named properties of d.Value (all of its properties
// if none are named) into the stored entity, with If-Match d.ETag (Merge
// Entity); properties not named keep their stored values. It returns the
// entity's new ETag.
//
// An empty d.ETag matches etagstore.ErrETagRequired and nothing is sent;
// ETagAny merges into whatever version is stored; a stale ETag returns a
// *etagstore.ConflictError[T]; a missing entity matches etagstore.ErrNotFound;
// a merge whose answer was lost matches etagstore.ErrOutcomeUnknown.
func Merge[T any](ctx context.Context, s *etagstore.Store[T], d etagstore.Doc[T], properties ...string) (etagstore.ETag, error) {
	if d.ETag == "" {
		return "", fmt.Errorf("%w: Merge %q", etagstore.ErrETagRequired, d.Key)
	}
	etag, err := merge(ctx, s, d.Key, d.Value, etagstore.IfMatch(d.ETag), properties)
	if errors.Is(err, etagstore.ErrConflict) {
		return "", conflict(ctx, s, d.Key, d.ETag, d.Value, err)
	}
	return etag, err
}

// UpsertMerge inserts v under key, or merges the named properties of v (all
// if none are named) into the stored entity with no concurrency check
// (Insert or Merge Entity): the documented bypass, like Store.Upsert.
func UpsertMerge[T any](ctx context.Context, s *etagstore.Store[T], key string, v T, properties ...string) (etagstore.ETag, error) {
	return merge(ctx, s, key, v, etagstore.Cond{Kind: etagstore.CondNone}, properties)
}

func merge[T any](ctx context.Context, s *etagstore.Store[T], key string, v T, cond etagstore.Cond, properties []string) (etagstore.ETag, error) {
	b, ok := s.Backend().(*Backend)
	if !ok {
		return "", fmt.Errorf("%w: tablestore: merge needs a Store on a tablestore Backend, not %T", etagstore.ErrInvalidInput, s.Backend())
	}
	if err := etagstore.CheckKey(key); err != nil {
		return "", err
	}
	data, err := s.Codec().Marshal(v)
	if err != nil {
		return "", err
	}
	if data, err = selectProperties(data, properties); err != nil {
		return "", err
	}
	etag, err := b.write(ctx, key, etagstore.Write{Data: data, Cond: cond}, aztables.UpdateModeMerge)
	var re *azcore.ResponseError
	if err != nil && !errors.As(err, &re) && !errors.Is(err, context.Canceled) {
		if _, definite := sentinelOf(err); !definite {
			return "", fmt.Errorf("%w: %w", etagstore.ErrOutcomeUnknown, err)
		}
	}
	return etag, err
}

// sentinelOf reports whether err is one of etagstore's definite outcomes.
func sentinelOf(err error) (error, bool) {
	for _, s := range []error{etagstore.ErrNotFound, etagstore.ErrExists, etagstore.ErrConflict, etagstore.ErrETagRequired,
		etagstore.ErrInvalidKey, etagstore.ErrTooLarge, etagstore.ErrInvalidInput} {
		if errors.Is(err, s) {
			return s, true
		}
	}
	return nil, false
}

// conflict turns a 412 on key into a *etagstore.ConflictError[T] holding
// the stored document; a document that is gone matches etagstore.ErrNotFound.
func conflict[T any](ctx context.Context, s *etagstore.Store[T], key string, held etagstore.ETag, mine T, cause error) error {
	theirs, err := s.Get(ctx, key)
	if errors.Is(err, etagstore.ErrNotFound) {
		return err
	}
	if err != nil {
		return cause
	}
	return &etagstore.ConflictError[T]{Key: key, ETag: held, Mine: mine, Theirs: theirs, Attempts: 1}
}
