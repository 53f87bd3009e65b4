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
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/heat"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/members"
	"github.com/etagstore/etagstore/internal/paging"
	"github.com/etagstore/etagstore/internal/readshare"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/retry"
	"github.com/etagstore/etagstore/internal/telemetry"
	"github.com/etagstore/etagstore/internal/turns"
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
	// what it costs without the cache. Default (0): 1024 keys; negative:
	// no cache.
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
	core
	seam[T]             // the backend packages' way in (seam.go)
	enc     codec.Of[T] // T's encoding through the Store's codec
	idx     *indexes[T] // its indexes (index.go); nil: none

	groups updategroup.Groups[T, Extra] // group commit for Updates
}

// core is the part of a Store that knows nothing of T: the backend, the
// delivery engine's policy and state, and telemetry.
type core struct {
	b         driver.Backend
	abilities driver.Abilities
	retry     retry.Policy
	clock     Clock
	keepIDs   int
	cache     *cache.Cache
	heat      heat.Heat
	turns     turns.Layer // the hot-key hand-over (the engine's Contention)
	env       *engine.Env // the delivery engine's environment (deliver.go)
	obs       *telemetry.Recorder
	known     members.Known    // the members T's documents hold (nil Names: all; see Extra.Names)
	merges    bool             // the codec applies a change to a stored document (it has Merge)
	reads     *readshare.Reads // concurrent Gets' shared reads; nil: off
	grouped   bool             // group commit is on (Options.DisableGroupCommit unset)
	reentry   reentry.Reentry  // writes from inside user code of their own key (internal/reentry)
	life      *lifetimes       // when documents expire (expiry.go); nil: never
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
	s := &Store[T]{core: core{b: b, clock: o.Clock, keepIDs: o.KeepWriteIDs, cache: cache.New(o.CacheSize), obs: newRecorder(b, telemetry.Providers{TracerProvider: o.TracerProvider, MeterProvider: o.MeterProvider, Logger: o.Logger, RecordKeys: o.RecordKeys}), grouped: !o.DisableGroupCommit}}
	s.abilities = b.Abilities()
	c := cmp.Or(o.Codec, s.abilities.Codec, JSON)
	s.enc = codec.New[T](c)
	s.known, s.merges = codec.Known(c, reflect.TypeFor[T]()), s.enc.Merges()
	s.retry = retry.Default
	if o.Retry != nil {
		s.retry = retry.Policy(*o.Retry).WithDefaults()
	}
	if s.clock == nil {
		s.clock = retry.System{}
	}
	s.keepIDs = min(s.keepIDs, 40) // 40 ids and the rest fit in driver.MaxMetaLen
	if s.keepIDs <= 0 {
		s.keepIDs = 16
	}
	s.idx = newIndexes(b, s.enc, idx)
	s.life = s.idx.lifetimes(s.enc.Decode, s.clock, o.ExpirySkew)
	s.b = s.idx.stamping(s.b, s.life) // expiry.go
	s.abilities = s.b.Abilities()     // its Commit, when b has one, stamps too
	s.env = s.newEnv()
	if s.idx != nil {
		s.env.Implier = s.idx.implier()
	}
	if !o.DisableGroupCommit {
		s.reads = readshare.New(s.fetch)
	}
	s.seam = extras[T]{s}
	return s
}

// Backend returns the backend the Store was given (New's b).
func (s *Store[T]) Backend() driver.Backend { return index.Unstamped(s.b) }

// Codec returns the codec the Store encodes documents with.
func (s *Store[T]) Codec() Codec { return s.enc.Codec() }

func (c *core) checkKey(key string) error {
	if err := driver.CheckKey(key); err != nil {
		return err
	}
	return c.b.ValidateKey(key)
}

// holds reports whether the version cache holds a copy of key a write may
// start from.
func (c *core) holds(key string) bool {
	_, ok := c.cache.Base(key, c.clock)
	return ok
}

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
	ctx, sp := s.obs.Begin(ctx, telemetry.OpGet, key)
	d, err := s.get(ctx, key, &sp.Stats)
	sp.End(err)
	return d, err
}

func (s *Store[T]) get(ctx context.Context, key string, st *telemetry.Stats) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	var it driver.Item
	var hit bool
	var err error
	if s.reads == nil || isUngrouped(ctx) {
		it, hit, err = s.fetch(ctx, key)
	} else {
		it, hit, err = s.reads.Read(ctx, key)
	}
	if err != nil {
		return Doc[T]{}, err
	}
	if hit {
		st.CacheHit = true
		s.obs.CacheLookup(ctx, true, true)
	}
	return s.decode(it)
}

// List yields the documents whose key starts with prefix, in the order
// the backend declares (see Store.CompareKeys).
// An error is yielded once, with a zero Doc, and ends the sequence.
func (s *Store[T]) List(ctx context.Context, prefix string) iter.Seq2[Doc[T], error] {
	return func(yield func(Doc[T], error) bool) {
		ctx, sp := s.obs.Begin(ctx, telemetry.OpList, prefix)
		failed := errPanicked // until the loop ends normally (yield may panic)
		defer func() { sp.End(failed) }()
		if s.reserved(prefix) {
			failed = nil
			return
		}
		failed = paging.Each(s.b.List(ctx, prefix), s.decode, isExpired, yield)
	}
}

// reserved reports whether prefix reaches into the keys of entries
// (index.Reserved): List and Page of it yield nothing.
func (c *core) reserved(prefix string) bool { return index.Reserved(c.abilities.Entries, prefix) }

// fetch reads key: from the version cache when the backend confirms the
// copy kept is current (ReadIfChanged), else from the backend. hit
// reports the former.
func (c *core) fetch(ctx context.Context, key string) (it driver.Item, hit bool, err error) {
	return c.cache.Fetch(ctx, c.b, c.abilities.ReadIfChanged, key)
}
