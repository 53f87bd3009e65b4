// Package txn is the transaction machinery below the root's typed view:
// what one run of a transaction's fn read and wrote over every Store it
// used (State, one View per Store), the request its commit sends, the
// checks of its reads (verify, revalidate), one call's path through the
// engine (Call), and group commit for the transactions of one commit
// scope (group.go, batch.go, fork.go, lookup.go). It knows no T: a Store
// is the Store interface, which the root's typed adapter implements, and
// the values fn put are the root's (View.Values).
package txn

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Version is a version of a key as a transaction read it.
type Version = engine.Version

// Store is what the machinery knows of a Store: its backend and engine,
// its version cache and telemetry, and the one step that decodes T
// (Apply). Two Stores are one when their values are equal.
type Store interface {
	Env() *engine.Env
	Abilities() *driver.Abilities
	Backend() driver.Backend
	// BackendName names the backend's package in error texts.
	BackendName() string
	Reentry() *reentry.Reentry
	Recorder() *telemetry.Recorder
	// Grouped reports whether group commit is on (not
	// Options.DisableGroupCommit).
	Grouped() bool
	CheckKey(key string) error
	// Holds reports whether the version cache holds a copy of key a
	// write may start from.
	Holds(key string) bool
	// Read reads key as the engine's hooks do (noting the cache).
	Read(ctx context.Context, key string) (Version, error)
	// Cached is the copy of key the version cache holds (nil: none).
	Cached(ctx context.Context, key string) []Version
	// Noted notes in the version cache a read of key that found it (or
	// err matching ErrNotFound), and returns the version read.
	Noted(key string, it driver.Item, err error) Version
	// CacheWritten keeps in the version cache the versions res wrote
	// (canonical: exactly T's encoding of the value).
	CacheWritten(res engine.Result, canonical bool)
	// Apply applies data, T's encoding of a value fn put, to b, the
	// version read (the codec's Merge): the document to write, the
	// changes a merging backend sends, and whether the document is data
	// itself.
	Apply(b Version, data []byte) (doc, changes []byte, canonical bool, err error)
}

// implied is the Implier of a transaction's deliveries: each write's own
// Store's (index.Mixed), the Store that wrote the key in the state st
// returns (the attempt's), not the lead's alone, since a transaction may
// write documents of Stores that keep different indexes, or none.
func implied(st func() *State) engine.Implier {
	return index.Mixed(func(key string) engine.Implier {
		if s := st().owner[key]; s != nil {
			return s.Env().Implier
		}
		return nil
	})
}
