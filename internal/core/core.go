// Package core is the part of a Store that knows nothing of T: its
// backend and abilities, the delivery engine's policy, environment and
// state (internal/engine), the version cache, shared reads, reentry,
// telemetry and when its documents expire (lifetimes.go); the writes
// and reads it makes through them (deliver.go); and the loop that runs
// a pass in the background (every.go). The root's Store[T] holds one and
// adds T: its codec, its indexes, its typed API. It imports nothing of
// the root.
package core

import (
	"context"
	"fmt"
	"strings"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/cache"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/heat"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/members"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/readshare"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/retry"
	"github.com/etagstore/etagstore/internal/telemetry"
	"github.com/etagstore/etagstore/internal/turns"
)

// Core is the part of a Store that knows nothing of T. The root's New
// sets its fields, then its Env (NewEnv); it is not copied after.
type Core struct {
	Backend   driver.Backend
	Abilities driver.Abilities
	Retry     retry.Policy
	Clock     retry.Clock
	KeepIDs   int
	Cache     *cache.Cache
	Heat      heat.Heat
	Turns     turns.Layer // the hot-key hand-over (the engine's Contention)
	Env       *engine.Env // the delivery engine's environment (deliver.go)
	Obs       *telemetry.Recorder
	Known     members.Known    // the members T's documents hold (nil Names: all; see Extra.Names)
	Merges    bool             // the codec applies a change to a stored document (it has Merge)
	Reads     *readshare.Reads // concurrent Gets' shared reads; nil: off
	Grouped   bool             // group commit is on (Options.DisableGroupCommit unset)
	Reentry   reentry.Reentry  // writes from inside user code of their own key (internal/reentry)
	Life      *Lifetimes       // when documents expire (lifetimes.go); nil: never
}

// CheckKey refuses a key the backend cannot store (ErrInvalidKey).
func (c *Core) CheckKey(key string) error {
	if err := driver.CheckKey(key); err != nil {
		return err
	}
	return c.Backend.ValidateKey(key)
}

// Holds reports whether the version cache holds a copy of key a write may
// start from.
func (c *Core) Holds(key string) bool {
	_, ok := c.Cache.Base(key, c.Clock)
	return ok
}

// Reserved reports whether prefix reaches into the keys of entries
// (index.Reserved): List and Page of it yield nothing.
func (c *Core) Reserved(prefix string) bool { return index.Reserved(c.Abilities.Entries, prefix) }

// Fetch reads key: from the version cache when the backend confirms the
// copy kept is current (ReadIfChanged), else from the backend. hit
// reports the former.
func (c *Core) Fetch(ctx context.Context, key string) (it driver.Item, hit bool, err error) {
	return c.Cache.Fetch(ctx, c.Backend, c.Abilities.ReadIfChanged, key)
}

// Cached returns the version of key the version cache holds, if it is on
// and holds one (with ETag etag, unless etag is empty): a base an attempt
// may start from without reading.
func (c *Core) Cached(ctx context.Context, key string, etag driver.ETag) []engine.Version {
	if c.Cache == nil {
		return nil
	}
	v, ok := c.Cache.Version(key, c.Clock, etag)
	c.Obs.CacheLookup(ctx, ok, false)
	if !ok {
		return nil
	}
	return []engine.Version{c.Life.Judged(v)}
}

// ReadVersion is the version a read of key found (it, or err matching
// ErrNotFound).
func (c *Core) ReadVersion(key string, it driver.Item, err error) engine.Version {
	if err != nil {
		return engine.Version{Item: driver.Item{Key: key}, Verified: true, MetaKnown: true, Missing: err}
	}
	return c.Stored(it, true, false)
}

// Stored is the version it, read (verified) or known from a write;
// canonical says its Data is exactly T's encoding of its value.
// An expired document's version reads as missing (Lifetimes.Judged).
func (c *Core) Stored(it driver.Item, verified, canonical bool) engine.Version {
	return c.Life.Judged(engine.Version{Item: it, Exists: true, Verified: verified, MetaKnown: true, Canonical: canonical, Meta: meta.Parse(it.Meta)})
}

// instrumentationName is the name of the tracer and meter the Store uses.
const instrumentationName = "github.com/etagstore/etagstore"

// NewRecorder is the recorder of a Store on b, with the providers p.
func NewRecorder(b driver.Backend, p telemetry.Providers) *telemetry.Recorder {
	return telemetry.NewRecorder(instrumentationName, BackendName(b), p)
}

// BackendName is the short name of b's package: memstore, tablestore,
// blobstore, or a wrapper's.
func BackendName(b driver.Backend) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", index.Unstamped(b)), "*")
	name, _, _ = strings.Cut(name, ".")
	return name
}
