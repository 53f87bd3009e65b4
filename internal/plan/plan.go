// Package plan holds the plans (engine.Plan) of a Store's single-key
// writes that need no T: a read-modify-write over the version each
// attempt starts from (an Update, a Save, a group-commit batch), a write
// conditioned on the version it reads, and the writes of a Store with
// indexes or expiry that replace the version they find. Their refusals
// match the driver's sentinels, as the root's do.
package plan

import (
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/engine"
)

// Change computes a read-modify-write's new encoding from the version b
// it starts from, with the encoding of b's value it changed (baseline;
// nil when b is missing or it was not at hand), and reports whether it
// differs from b's.
type Change func(b engine.Version) (data, baseline []byte, changed bool, err error)

// Modification is the plan of a read-modify-write: over the version an
// attempt starts from, the Change's new encoding applied to it (Apply:
// the codec's).
type Modification struct {
	Create bool // a missing key is created (CreateIfMissing)
	Change Change
	Apply  func(b engine.Version, baseline, data []byte) (codec.Written, error)
	Last   codec.Written // the last attempt's write
	Mine   []byte        // the last attempt's new encoding
}

// Build is the request of an attempt over base[0]: none when the change
// changed nothing. A missing key matches ErrNotFound unless Create.
func (m *Modification) Build(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
	b := base[0]
	if !b.Exists && !m.Create {
		if b.Missing != nil {
			return nil, b.Missing // the read's ErrNotFound, in the backend's words
		}
		return nil, driver.Errorf(driver.ErrNotFound, "%q", b.Key)
	}
	data, baseline, changed, err := m.Change(b)
	if err != nil || !changed {
		m.Last, m.Mine = codec.Written{Canonical: b.Canonical}, baseline // nothing to write: the Doc is b's
		return nil, err
	}
	if m.Last, err = m.Apply(b, baseline, data); err != nil {
		return nil, err
	}
	m.Mine = data
	return engine.Request{m.Last.Over(d, b)}, nil
}

// Conditioned is the plan of a write of key conditioned on the version
// it reads, which must hold held (ETagAny: any): a missing key matches
// ErrNotFound, a version that holds another ETag is conflict's error
// (a *ConflictError), and write builds the write over the version read.
func Conditioned(key string, held driver.ETag, conflict func(b engine.Version, attempts int) error, write func(*engine.Delivery, engine.Version) (engine.KeyWrite, error)) engine.Plan {
	return engine.PlanFunc(func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
		b := base[0]
		switch {
		case !b.Exists:
			return nil, driver.Errorf(driver.ErrNotFound, "%q", key)
		case held != driver.ETagAny && b.ETag != held:
			return nil, conflict(b, d.Attempts())
		}
		w, err := write(d, b)
		if err != nil {
			return nil, err
		}
		return engine.Request{w}, nil
	})
}

// UpsertOver is the plan of an Upsert of data under key for a Store with
// indexes, whose entries need the version it replaces: a write over the
// version the attempt starts from (created when missing), again over the
// new one after a lost race, so that the last writer still wins.
func UpsertOver(key string, data []byte) engine.Plan {
	return engine.PlanFunc(func(_ *engine.Delivery, base []engine.Version) (engine.Request, error) {
		b := base[0]
		c := driver.Cond{Kind: driver.CondCreate}
		if b.Stored() { // an expired version, too
			c = driver.IfMatch(b.ETag)
		}
		return engine.Request{engine.Fresh(key, c, data, 0).Replacing(b)}, nil
	})
}

// CreateOver is the plan of a Create of data under key (carrying fence)
// that found the key present, for a Store whose documents expire: over
// the version a read finds, if it has expired (conditioned on its ETag,
// so that a write that refreshes it meanwhile wins), and as a create
// again if it is gone; a live version matches ErrExists.
func CreateOver(key string, data []byte, fence int64) engine.Plan {
	return engine.PlanFunc(func(_ *engine.Delivery, base []engine.Version) (engine.Request, error) {
		b := base[0]
		if b.Exists {
			return nil, driver.Errorf(driver.ErrExists, "%q", key)
		}
		c := driver.Cond{Kind: driver.CondCreate}
		if b.Stored() {
			c = driver.IfMatch(b.ETag)
		}
		return engine.Request{engine.Fresh(key, c, data, fence).Replacing(b)}, nil
	})
}
