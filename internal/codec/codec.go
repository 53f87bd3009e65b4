// Package codec is T's encoding through a Store's driver.Codec, generic
// in T: a value encoded and decoded, the version a change starts from,
// and a change applied to a stored document (the codec's Merge). It also
// holds JSON, the default Codec's implementation. Its refusals match the
// driver's sentinels, as the root's do.
package codec

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/members"
)

// Of is T's encoding through c: a Store's codec as its writes use it.
type Of[T any] struct {
	c      driver.Codec
	merger merger // c's Merge; nil when it has none
}

// New is T's encoding through c.
func New[T any](c driver.Codec) Of[T] {
	m, _ := c.(merger)
	return Of[T]{c: c, merger: m}
}

// Codec is the codec T is encoded with.
func (c Of[T]) Codec() driver.Codec { return c.c }

// Merges reports whether the codec applies a change to a stored
// document (it has Merge): otherwise a write stores T's encoding whole.
func (c Of[T]) Merges() bool { return c.merger != nil }

// typeChecker is the optional CheckType method of a Codec.
type typeChecker interface {
	CheckType(t reflect.Type) error
}

// merger is a Codec's Merge method (see driver.Codec).
type merger interface {
	Merge(stored, base, mine []byte) (data, changes []byte, err error)
}

// baseDecoder is a Codec whose Decode is Unmarshal that also returns what
// Marshal returns for the value decoded, or nil when Marshal would refuse
// it (tablestore's EntityCodec, which reuses the bytes it decodes).
type baseDecoder interface {
	Decode(data []byte, v any) ([]byte, error)
}

// Encode encodes v, the document of key; a value the codec refuses (NaN
// under JSON, say) matches ErrInvalidInput, unless the codec's error
// already matches one of the driver's sentinels. Nothing is sent.
func (c Of[T]) Encode(key string, v T) ([]byte, error) {
	if t := reflect.TypeFor[T](); t.Kind() == reflect.Interface {
		if tc, ok := c.c.(typeChecker); ok {
			if err := tc.CheckType(t); err != nil {
				return nil, EncodeError(key, err)
			}
		}
	}
	data, err := c.c.Marshal(v)
	if err != nil {
		return nil, EncodeError(key, err)
	}
	return data, nil
}

// Decode decodes data, the stored document of key, into a T; a failure
// is DecodeError's.
func (c Of[T]) Decode(key string, data []byte) (T, error) {
	var v T
	if err := c.c.Unmarshal(data, &v); err != nil {
		return v, DecodeError(key, err)
	}
	return v, nil
}

// StartFrom decodes the base version b into a fresh value for a mutation,
// and returns the encoding an unchanged value would have, taken before the
// mutation runs (it may change maps or pointers the value shares). A codec
// that can build that encoding while it decodes (a baseDecoder) is asked
// to, so that the value is not encoded a second time.
func (c Of[T]) StartFrom(b engine.Version) (v *T, baseline []byte, err error) {
	v = new(T)
	if !b.Exists {
		return v, nil, nil
	}
	bd, decodes := c.c.(baseDecoder)
	switch {
	case b.Canonical || !decodes:
		err = c.c.Unmarshal(b.Data, v)
	default:
		baseline, err = bd.Decode(b.Data, v)
	}
	if err != nil {
		return v, nil, DecodeError(b.Key, err)
	}
	if b.Canonical {
		return v, b.Data, nil
	}
	if baseline == nil {
		baseline, err = c.Encode(b.Key, *v)
	}
	return v, baseline, err
}

// Written is what a write of data, T's encoding of a changed value, stores
// over b, the version the change started from, whose value T encodes as
// baseline (nil: not at hand): the change applied to b's document (the
// codec's Merge), with the changes a merging backend sends. Canonical says
// the document is data itself.
type Written struct {
	Data, Changes []byte
	Canonical     bool
}

// Over is d's write of w over b, the version its change started from.
func (w Written) Over(d *engine.Delivery, b engine.Version) engine.KeyWrite {
	kw := d.Over(b, w.Data)
	kw.Write.Changes = w.Changes // sent only with If-Match of b (driver.Write.Payload)
	return kw
}

// Fresh is the write of w under key that starts a new history, If-Match
// etag (a blind Replace).
func (w Written) Fresh(key string, etag driver.ETag) engine.KeyWrite {
	kw := engine.Fresh(key, driver.IfMatch(etag), w.Data, 0)
	kw.Write.Changes = w.Changes
	return kw
}

// Whole is the write of data alone: T, whole.
func Whole(data []byte) Written { return Written{Data: data, Canonical: true} }

// Apply applies data, the new encoding of b's value, to b (see Written).
// A codec that cannot merge writes data whole.
func (c Of[T]) Apply(b engine.Version, baseline, data []byte) (Written, error) {
	if !b.Exists || b.Data == nil || c.merger == nil {
		return Whole(data), nil
	}
	switch {
	case baseline != nil:
	case b.Canonical:
		baseline = b.Data
	default:
		var err error
		if _, baseline, err = c.StartFrom(b); err != nil {
			return Written{}, err
		}
	}
	out, changes, err := c.merger.Merge(b.Data, baseline, data)
	if err != nil {
		return Written{}, EncodeError(b.Key, err)
	}
	return Written{Data: out, Changes: changes, Canonical: bytes.Equal(out, data)}, nil
}

// Known returns the member names codec stores for type t, or nil when
// codec cannot tell (see driver.Codec).
func Known(codec driver.Codec, t reflect.Type) members.Known {
	m, ok := codec.(interface {
		Members(reflect.Type) map[string]bool
	})
	if !ok {
		return members.Known{}
	}
	f, folds := codec.(interface{ FoldsNames() bool })
	return members.Known{Names: m.Members(t), Fold: folds && f.FoldsNames()}
}

// EncodeError reports a value of key the codec refused. It matches
// ErrInvalidInput, unless the codec's error already matches one of the
// driver's sentinels.
func EncodeError(key string, err error) error {
	if driver.SentinelOf(err) != nil {
		return Prefixed("encode", key, err)
	}
	return fmt.Errorf("%w: encode %q: %v", driver.ErrInvalidInput, key, err)
}

// DecodeError reports a stored document the codec cannot decode into T.
// It matches ErrInvalidInput (the stored bytes are not a T), unless the
// codec's error already matches one of the driver's sentinels; the
// codec's error stays in the chain for errors.As.
func DecodeError(key string, err error) error {
	if driver.SentinelOf(err) != nil {
		return Prefixed("decode", key, err)
	}
	return fmt.Errorf("%w: decode %q: %w", driver.ErrInvalidInput, key, err)
}

// Prefixed is err, unwrapped to as it is, printed as
// `etagstore: op "key": …` with err's own "etagstore: " prefix left out, so
// that the prefix does not repeat: `etagstore: encode "k": too large: …`.
func Prefixed(op, key string, err error) error {
	return &prefixedError{msg: fmt.Sprintf("etagstore: %s %q: %s", op, key, strings.TrimPrefix(err.Error(), "etagstore: ")), err: err}
}

type prefixedError struct {
	msg string
	err error
}

func (e *prefixedError) Error() string { return e.msg }
func (e *prefixedError) Unwrap() error { return e.err }
