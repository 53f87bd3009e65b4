package etagstore

import (
	"cmp"
	"context"
	"iter"
	"log/slog"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/cache"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/core"
	"github.com/etagstore/etagstore/internal/fence"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/paging"
	"github.com/etagstore/etagstore/internal/readshare"
	"github.com/etagstore/etagstore/internal/retry"
	"github.com/etagstore/etagstore/internal/telemetry"
	"github.com/etagstore/etagstore/internal/updategroup"
)

// Options configure a Store. The zero value and nil mean the defaults.
type Options struct {
	// Codec encodes documents. Default: the backend's own codec
	// (driver.Abilities.Codec: tablestore's entity codec), otherwise JSON.
	Codec Codec
	// Retry bounds Update's and Save's retries. Default: RetryPolicy's defaults.
	Retry *RetryPolicy
	// Clock drives retry delays. Default: the system clock.
	Clock Clock
	// CacheSize is how many keys the version cache keeps the last
	// version of that this Store read or wrote (at most 16 MiB of
	// documents in all; a document over 1 MiB is not kept). An Update
	// writes against the kept version at once — one request when no other
	// writer came in between — and falls back to a read on 412. A key
	// whose kept version proves stale (another process writes it) is
	// read first again until it has been left to this Store for a minute
	// or two, so that where kept versions are usually stale an Update costs
	// what it costs without the cache. Full, the cache lets go of keys
	// used least lately. Default (0): 1024 keys; negative: no cache.
	CacheSize int
	// DisableGroupCommit makes every Update read and write on its own,
	// every Transact commit on its own, and every Get read on its own.
	// Default: concurrent Updates of one key in one Store share one read
	// and one conditional write (see Update), concurrent Transacts of one
	// Store share one commit (see Store.Transact), and concurrent Gets of
	// one key share reads (see Get).
	DisableGroupCommit bool
	// KeepWriteIDs is how many recent write ids a document remembers, so
	// that a write whose response was lost is recognised as committed.
	// Default: 16.
	KeepWriteIDs int
	// TracerProvider makes one span per Store operation (see docs/observability.md's
	// instrument table). Default: the global provider (otel.GetTracerProvider),
	// a no-op until the app installs an SDK.
	TracerProvider trace.TracerProvider
	// MeterProvider records the Store's metrics. Default: the global
	// provider (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider
	// Logger receives warnings (unknown outcomes, fenced writes) and, at
	// debug level, every retry with its delay and every lost response
	// resolved. Default: none.
	Logger *slog.Logger
	// ExpirySkew bounds how far apart the clocks of the processes that
	// share a Store's documents may be, for a Store with an Expiry index:
	// Sweep deletes a document only once it has been expired that long by
	// the sweeper's clock, so that no process whose clock is behind by
	// less still reads it as live when it goes. Reads hide a document at
	// once by their own clock. Default: 5 seconds; negative: none.
	ExpirySkew time.Duration
	// RecordKeys adds each operation's key to its span (etagstore.key; a
	// tablestore query's filter as etagstore.filter), and lets error texts,
	// which name keys and ETags, into span statuses and logs (otherwise
	// they say the outcome). Keys can be personal data. Default: false.
	RecordKeys bool
}

// Store is a typed document store with optimistic concurrency over a
// driver.Backend. A Store is safe for concurrent use by multiple goroutines.
type Store[T any] struct {
	core    core.Core          // what knows nothing of T (internal/core)
	seam[T]                    // the backend packages' way in (seam.go)
	enc     codec.Of[T]        // T's encoding through the Store's codec
	idx     *index.Declared[T] // its indexes (index.go); nil: none

	groups updategroup.Groups[T, Extra] // group commit for Updates
}

// New returns a Store of documents of type T kept in b. Nil opts means the
// defaults. idx are the Store's indexes (Unique, Lookup), kept by every
// write: a declaration New refuses (an invalid or repeated name) fails
// every write and read by index with ErrInvalidInput, and over a backend
// that cannot commit entries with documents (blobs) every write fails
// with errors.ErrUnsupported.
func New[T any](b driver.Backend, opts *Options, idx ...Index[T]) *Store[T] {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Store[T]{}
	c := &s.core
	c.Backend, c.Abilities, c.Clock, c.KeepIDs, c.Grouped = b, b.Abilities(), o.Clock, o.KeepWriteIDs, !o.DisableGroupCommit
	c.Cache = cache.New(o.CacheSize)
	c.Obs = core.NewRecorder(b, telemetry.Providers{TracerProvider: o.TracerProvider, MeterProvider: o.MeterProvider, Logger: o.Logger, RecordKeys: o.RecordKeys})
	cd := cmp.Or(o.Codec, c.Abilities.Codec, JSON)
	s.enc = codec.New[T](cd)
	c.Known, c.Merges = codec.Known(cd, reflect.TypeFor[T]()), s.enc.Merges()
	c.Retry = retry.Default
	if o.Retry != nil {
		c.Retry = retry.Policy(*o.Retry).WithDefaults()
	}
	if c.Clock == nil {
		c.Clock = retry.System{}
	}
	c.KeepIDs = min(c.KeepIDs, 40) // 40 ids and the rest fit in driver.MaxMetaLen
	if c.KeepIDs <= 0 {
		c.KeepIDs = 16
	}
	s.idx = declare(b, s.enc, idx)
	at := s.idx.At(s.enc.Decode) // when a document expires (Expiry)
	if at != nil {
		c.Life = core.NewLifetimes(at, c.Clock, o.ExpirySkew)
	}
	c.Backend = s.idx.Stamping(c.Backend, at) // a backend without entries: the instant in each write
	c.Abilities = c.Backend.Abilities()       // its Commit, when b has one, stamps too
	c.Env = c.NewEnv()
	if s.idx != nil {
		c.Env.Implier = s.idx.Implier()
	}
	if !o.DisableGroupCommit {
		c.Reads = readshare.New(c.Fetch)
	}
	s.seam = extras[T]{s}
	return s
}

// Backend returns the backend the Store was given (New's b).
func (s *Store[T]) Backend() driver.Backend { return index.Unstamped(s.core.Backend) }

// Codec returns the codec the Store encodes documents with.
func (s *Store[T]) Codec() Codec { return s.enc.Codec() }

// Get returns the document stored under key with its ETag.
// A missing key matches ErrNotFound; a bad key ErrInvalidKey. With the
// version cache on and a backend that can (blobs), a cached copy is
// revalidated with If-None-Match instead of downloaded again.
//
// Concurrent Gets of one key in one Store share reads: one read of a key
// is in flight at a time, and the Gets that arrive meanwhile share the
// next, sent when it is answered (so that each sees every write that
// ended before it was called). A shared read that has waited 100 ms for
// the read ahead of it is sent on its own. Each caller decodes its own
// value.
func (s *Store[T]) Get(ctx context.Context, key string) (Doc[T], error) {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpGet, key)
	d, err := s.get(ctx, key, &sp.Stats)
	sp.End(err)
	return d, err
}

func (s *Store[T]) get(ctx context.Context, key string, st *telemetry.Stats) (Doc[T], error) {
	if err := s.core.CheckKey(key); err != nil {
		return Doc[T]{}, err
	}
	var it driver.Item
	var hit bool
	var err error
	if s.core.Reads == nil || fence.Ungrouped(ctx) {
		it, hit, err = s.core.Fetch(ctx, key)
	} else {
		it, hit, err = s.core.Reads.Read(ctx, key)
	}
	if err != nil {
		return Doc[T]{}, err
	}
	if hit {
		st.CacheHit = true
		s.core.Obs.CacheLookup(ctx, true, true)
	}
	return s.decode(it)
}

// List yields the documents whose key starts with prefix, in the order
// the backend declares (see Store.CompareKeys).
// An error is yielded once, with a zero Doc, and ends the sequence.
func (s *Store[T]) List(ctx context.Context, prefix string) iter.Seq2[Doc[T], error] {
	return func(yield func(Doc[T], error) bool) {
		ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpList, prefix)
		failed := errPanicked // until the loop ends normally (yield may panic)
		defer func() { sp.End(failed) }()
		if s.core.Reserved(prefix) {
			failed = nil
			return
		}
		failed = paging.Each(s.core.Backend.List(ctx, prefix), s.decode, core.IsExpired, yield)
	}
}
