package etagstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
)

// ETag is an opaque version token. Compare ETags only for equality: table
// ETags are weak (W/"datetime'…'") and blob ETags are quoted hex.
type ETag string

// ETagAny matches any existing version (If-Match: *). Passing it is the
// explicit last-writer-wins opt-out.
const ETagAny ETag = "*"

// Doc is a document with its key and the ETag of the version it came from.
type Doc[T any] struct {
	Key   string
	Value T
	ETag  ETag
}

// Sentinel errors. Every failure of the package matches at most one of them
// with errors.Is.
var (
	// ErrNotFound: the key does not exist (HTTP 404).
	ErrNotFound = errors.New("etagstore: not found")
	// ErrExists: a create found the key already present (HTTP 409).
	ErrExists = errors.New("etagstore: already exists")
	// ErrConflict: the document changed since the caller read it (HTTP
	// 412). The error is a *ConflictError[T] when it comes from a Store.
	ErrConflict = errors.New("etagstore: conflict")
	// ErrETagRequired: a conditional write or delete was given no ETag.
	// Nothing was sent. Use ETagAny to overwrite deliberately.
	ErrETagRequired = errors.New("etagstore: etag required")
	// ErrInvalidKey: the key cannot be stored by the backend. Nothing was sent.
	ErrInvalidKey = errors.New("etagstore: invalid key")
	// ErrTooLarge: the document exceeds the backend's limits. Nothing was sent.
	ErrTooLarge = errors.New("etagstore: too large")
	// ErrInvalidInput: an argument is out of range (for example a lease
	// duration). Nothing was sent.
	ErrInvalidInput = errors.New("etagstore: invalid input")
	// ErrFenced: the document was written under a newer fencing token than
	// the one this write carries (see WithFence). Nothing was written.
	ErrFenced = errors.New("etagstore: fenced")
	// ErrLocked: another holder has the lease or lock (HTTP 409
	// LeaseAlreadyPresent, or 412 LeaseIdMissing on a write).
	ErrLocked = errors.New("etagstore: locked")
	// ErrLockLost: a lease or lock this caller held is gone (expired,
	// broken or taken over); work done under it must stop.
	ErrLockLost = errors.New("etagstore: lock lost")
)

// errorf returns an error that matches sentinel and says more.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}

// Options configure a Store. The zero value and nil mean the defaults.
type Options struct {
	// Codec encodes documents. Default: the backend's own codec if it
	// implements CodecProvider, otherwise JSON.
	Codec Codec
	// Retry bounds Update's and Save's retries. Default: DefaultRetryPolicy.
	Retry *RetryPolicy
	// Clock drives retry delays. Default: SystemClock.
	Clock Clock
	// KeepWriteIDs is how many recent write ids a document remembers, so
	// that a write whose response was lost is recognised as committed.
	// Default: 8.
	KeepWriteIDs int
}

// Store is a typed document store with optimistic concurrency over a
// Backend. A Store is safe for concurrent use by multiple goroutines.
type Store[T any] struct {
	b       Backend
	codec   Codec
	retry   RetryPolicy
	clock   Clock
	keepIDs int
}

// New returns a Store of documents of type T kept in b. Nil opts means the
// defaults.
func New[T any](b Backend, opts *Options) *Store[T] {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Store[T]{b: b, codec: o.Codec, clock: o.Clock, keepIDs: o.KeepWriteIDs}
	if s.codec == nil {
		if cp, ok := b.(CodecProvider); ok {
			s.codec = cp.Codec()
		} else {
			s.codec = JSON
		}
	}
	if o.Retry != nil {
		s.retry = o.Retry.withDefaults()
	} else {
		s.retry = DefaultRetryPolicy
	}
	if s.clock == nil {
		s.clock = SystemClock
	}
	if s.keepIDs <= 0 {
		s.keepIDs = 8
	}
	return s
}

// Backend returns the backend the Store uses.
func (s *Store[T]) Backend() Backend { return s.b }

// Codec returns the codec the Store encodes documents with.
func (s *Store[T]) Codec() Codec { return s.codec }

func (s *Store[T]) checkKey(key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return s.b.ValidateKey(key)
}

// Get returns the document stored under key with its ETag.
// A missing key matches ErrNotFound; a bad key ErrInvalidKey.
func (s *Store[T]) Get(ctx context.Context, key string) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	it, err := s.b.Read(ctx, key)
	if err != nil {
		return Doc[T]{}, err
	}
	return s.decode(it)
}

// Create stores v under key only if the key does not exist yet (If-None-Match:
// * on blobs, Insert Entity on tables). An existing key matches ErrExists.
func (s *Store[T]) Create(ctx context.Context, key string, v T) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	data, err := s.encode(key, v)
	if err != nil {
		return Doc[T]{}, err
	}
	id := newWriteID()
	fence, _ := FenceFrom(ctx)
	etag, err := s.b.Write(ctx, key, Write{Data: data, Cond: Cond{Kind: CondCreate}, Meta: meta{}.then(id, s.keepIDs, fence).String()})
	if errors.Is(err, ErrExists) {
		// The SDK may have retried our own committed create; that is a success.
		if it, ok := s.committed(ctx, key, id); ok {
			return s.decode(it)
		}
	}
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: key, Value: v, ETag: etag}, nil
}

// Replace writes d.Value under d.Key only if the stored ETag is still d.ETag
// (If-Match). d.ETag == ETagAny overwrites whatever is stored (last writer
// wins) but still requires the document to exist.
//
// An empty ETag matches ErrETagRequired and nothing is sent; a stale ETag
// returns a *ConflictError[T] (matching ErrConflict) holding the current
// document; a missing document matches ErrNotFound.
func (s *Store[T]) Replace(ctx context.Context, d Doc[T]) (Doc[T], error) {
	if err := s.checkKey(d.Key); err != nil {
		return Doc[T]{}, err
	}
	if d.ETag == "" {
		return Doc[T]{}, errorf(ErrETagRequired, "Replace %q", d.Key)
	}
	if _, fenced := FenceFrom(ctx); fenced {
		// The token must be checked against the stored version: read it,
		// and write with If-Match of the version read.
		return s.readModifyWrite(ctx, d.Key, false, nil, func(cur Doc[T]) (T, error) {
			if d.ETag != ETagAny && cur.ETag != d.ETag {
				return d.Value, &ConflictError[T]{Key: d.Key, ETag: d.ETag, Mine: d.Value, Theirs: cur, Attempts: 1}
			}
			return d.Value, nil
		})
	}
	data, err := s.encode(d.Key, d.Value)
	if err != nil {
		return Doc[T]{}, err
	}
	id := newWriteID()
	etag, err := s.b.Write(ctx, d.Key, Write{Data: data, Cond: IfMatch(d.ETag), Meta: meta{}.then(id, s.keepIDs, 0).String()})
	switch {
	case err == nil:
		return Doc[T]{Key: d.Key, Value: d.Value, ETag: etag}, nil
	case errors.Is(err, ErrConflict):
		return s.conflict(ctx, d.Key, d.ETag, id, d.Value, 1)
	default:
		return Doc[T]{}, err
	}
}

// Upsert stores v under key whether or not it exists and whatever its ETag
// (Insert or Replace Entity; an unconditional blob upload). It is the
// documented bypass of the concurrency check: the last writer wins.
func (s *Store[T]) Upsert(ctx context.Context, key string, v T) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	if _, fenced := FenceFrom(ctx); fenced {
		return Doc[T]{}, errorf(ErrInvalidInput, "Upsert %q checks nothing and cannot honour a fencing token; use Update or Replace with ETagAny", key)
	}
	data, err := s.encode(key, v)
	if err != nil {
		return Doc[T]{}, err
	}
	etag, err := s.b.Write(ctx, key, Write{Data: data, Cond: Cond{Kind: CondNone}, Meta: meta{}.then(newWriteID(), s.keepIDs, 0).String()})
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: key, Value: v, ETag: etag}, nil
}

// Delete removes key only if its stored ETag is still etag (If-Match);
// ETagAny deletes whatever version is stored.
//
// An empty etag matches ErrETagRequired and nothing is sent; a stale etag
// returns a *ConflictError[T] holding the current document; a missing key
// matches ErrNotFound.
func (s *Store[T]) Delete(ctx context.Context, key string, etag ETag) error {
	if err := s.checkKey(key); err != nil {
		return err
	}
	if etag == "" {
		return errorf(ErrETagRequired, "Delete %q", key)
	}
	cond := IfMatch(etag)
	if token, fenced := FenceFrom(ctx); fenced {
		it, err := s.b.Read(ctx, key)
		if err != nil {
			return err
		}
		if etag != ETagAny && it.ETag != etag {
			var zero T
			_, err = s.conflict(ctx, key, etag, "", zero, 1)
			return err
		}
		if err := checkFence(key, parseMeta(it.Meta), token); err != nil {
			return err
		}
		cond = IfMatch(it.ETag) // atomic with the check
	}
	err := s.b.Delete(ctx, key, cond)
	if errors.Is(err, ErrConflict) {
		var zero T
		_, err = s.conflict(ctx, key, etag, "", zero, 1)
	}
	return err
}

// List yields the documents whose key starts with prefix, in key order.
// An error is yielded once, with a zero Doc, and ends the sequence.
func (s *Store[T]) List(ctx context.Context, prefix string) iter.Seq2[Doc[T], error] {
	return func(yield func(Doc[T], error) bool) {
		for it, err := range s.b.List(ctx, prefix) {
			if err != nil {
				yield(Doc[T]{}, err)
				return
			}
			d, err := s.decode(it)
			if !yield(d, err) || err != nil {
				return
			}
		}
	}
}

// UpdateOption changes how Update behaves.
type UpdateOption func(*updateConfig)

type updateConfig struct {
	create bool
}

// CreateIfMissing makes Update create a missing document: mutate receives
// the zero T and the write is create-only; if another writer creates the
// key first, Update re-reads and continues as an ordinary update.
func CreateIfMissing() UpdateOption {
	return func(c *updateConfig) { c.create = true }
}

// Update reads the document under key, applies mutate to a fresh copy and
// writes the result with If-Match of the version it read. When another
// writer got there first (HTTP 412) it re-reads, re-applies mutate and
// retries with backoff (see RetryPolicy); mutate must therefore be free of
// side effects outside *T and may run more than once.
//
//   - mutate returning an error aborts: nothing is written and that error is
//     returned as is.
//   - a mutation that leaves the encoded document unchanged writes nothing
//     and returns the current document.
//   - a missing key matches ErrNotFound, unless CreateIfMissing is given.
//   - when every attempt lost its race, a *ConflictError[T] (ErrConflict).
//   - a done ctx returns ctx.Err() (errors.Is(err, context.Canceled) holds).
//
// A write that committed but whose response was lost, so that the SDK's
// retry saw 412, is recognised by its write id on the re-read and returned
// as a success; the mutation is not applied twice.
func (s *Store[T]) Update(ctx context.Context, key string, mutate func(*T) error, opts ...UpdateOption) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	var cfg updateConfig
	for _, o := range opts {
		o(&cfg)
	}
	return s.readModifyWrite(ctx, key, cfg.create, nil, func(cur Doc[T]) (T, error) {
		v := cur.Value // a fresh decode: mutate cannot touch a shared value
		err := mutate(&v)
		return v, err
	})
}

// readModifyWrite is the engine of Update and Save, run inside the retry
// loop: read the current version (or take start on the first attempt),
// compute the new value with modify, and write it with If-Match of the
// version read (create-only when missing and create is set). A lost race is
// retried; an unchanged encoding writes nothing. cur has an empty ETag when
// the document is missing.
func (s *Store[T]) readModifyWrite(ctx context.Context, key string, create bool, start *Item, modify func(cur Doc[T]) (T, error)) (Doc[T], error) {
	var (
		result Doc[T]
		ids    []string // write ids this call has sent
		held   ETag     // the ETag of the last version read
		mine   T        // the last value computed
		lost   bool     // the last attempt's write lost a race
	)
	fence, fenced := FenceFrom(ctx)
	attempts, err := retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (bool, error) {
		lost = false
		var (
			it  Item
			err error
		)
		if attempt == 1 && start != nil && !fenced {
			it = *start
		} else {
			it, err = s.b.Read(ctx, key)
		}
		exists := err == nil
		switch {
		case errors.Is(err, ErrNotFound) && create:
		case err != nil:
			return false, err
		}
		stored := parseMeta(it.Meta)
		if exists && slices.ContainsFunc(ids, stored.has) {
			// One of our earlier writes committed after all (its response
			// was lost and the SDK's retry saw 412).
			result, err = s.decode(it)
			return false, err
		}
		cur := Doc[T]{Key: key}
		if exists {
			if cur, err = s.decode(it); err != nil {
				return false, err
			}
		}
		held = it.ETag
		if fenced {
			if err := checkFence(key, stored, fence); err != nil {
				return false, err
			}
		}
		if mine, err = modify(cur); err != nil {
			return false, err
		}
		data, err := s.encode(key, mine)
		if err != nil {
			return false, err
		}
		if exists && s.unchanged(data, it.Data, cur.Value) {
			result = cur
			return false, nil
		}
		id := newWriteID()
		ids = append(ids, id)
		w := Write{Data: data, Cond: Cond{Kind: CondCreate}, Meta: meta{}.then(id, s.keepIDs, fence).String()}
		if exists {
			w.Cond = IfMatch(it.ETag)
			w.Meta = stored.then(id, s.keepIDs, fence).String()
		}
		etag, err := s.b.Write(ctx, key, w)
		switch {
		case err == nil:
			result = Doc[T]{Key: key, Value: mine, ETag: etag}
			return false, nil
		case errors.Is(err, ErrConflict), errors.Is(err, ErrExists):
			lost = true
			return true, err
		case errors.Is(err, ErrNotFound) && create:
			lost = true
			return true, err // deleted since we read it: create it again
		default:
			return false, err
		}
	})
	if err == nil {
		return result, nil
	}
	if lost && ctx.Err() == nil {
		return s.conflict(ctx, key, held, ids[len(ids)-1], mine, attempts)
	}
	return Doc[T]{}, err
}

// unchanged reports whether data, the encoding of the mutated value, is the
// stored version: byte-equal to what was read, or else to the encoding of
// the value decoded from it (a backend such as tables hands back the
// properties in its own layout).
func (s *Store[T]) unchanged(data, stored []byte, cur T) bool {
	if bytes.Equal(data, stored) {
		return true
	}
	again, err := s.codec.Marshal(cur)
	return err == nil && bytes.Equal(data, again)
}

// committed re-reads key and reports whether the stored version was written
// with write id id.
func (s *Store[T]) committed(ctx context.Context, key, id string) (Item, bool) {
	it, err := s.b.Read(ctx, key)
	if err != nil || !parseMeta(it.Meta).has(id) {
		return Item{}, false
	}
	return it, true
}

// conflict builds the error for a write that found another version (HTTP
// 412): it reads the current document, Theirs. A document that is gone
// matches ErrNotFound instead. A current version that carries id, the
// write's own id, is our own write, committed before an SDK retry saw 412:
// that is a success and conflict returns it.
func (s *Store[T]) conflict(ctx context.Context, key string, held ETag, id string, mine T, attempts int) (Doc[T], error) {
	it, err := s.b.Read(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return Doc[T]{}, errorf(ErrNotFound, "%q was deleted", key)
	}
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%w on %q (reading the current version failed: %w)", ErrConflict, key, err)
	}
	theirs, err := s.decode(it)
	if err != nil {
		return Doc[T]{}, err
	}
	if id != "" && parseMeta(it.Meta).has(id) {
		return theirs, nil
	}
	return Doc[T]{}, &ConflictError[T]{Key: key, ETag: held, Mine: mine, Theirs: theirs, Attempts: attempts}
}
