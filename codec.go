package etagstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/fields"
	"github.com/etagstore/etagstore/internal/members"
)

// Codec turns documents into the bytes a Backend stores and back (see
// driver.Codec). JSON is the default; tablestore's EntityCodec maps struct
// fields to typed entity properties.
type Codec = driver.Codec

// typeChecker is the optional CheckType method of a Codec.
type typeChecker interface {
	CheckType(t reflect.Type) error
}

// JSON is the default Codec: encoding/json, which sorts map keys and so is
// deterministic.
//
// Marshal refuses what encoding/json would change silently — a string
// that is not valid UTF-8 (in a field, slice, map value or map key, or the
// text of an encoding.TextMarshaler or output of a json.Marshaler), which
// json turns into U+FFFD — and names the field in what json cannot
// encode (NaN, ±Inf, times outside years 0–9999): both are an
// *InvalidValueError, which matches ErrInvalidInput. []byte is binary
// (base64) and is stored as it is. Other errors of encoding/json are
// wrapped to match ErrInvalidInput too.
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) { return marshalJSON(v) }

// Members returns the members encoding/json stores for a struct t (or a
// pointer to one); nil for other types, which know every member.
func (jsonCodec) Members(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	known := map[string]bool{}
	for _, f := range fields.Of(t).Fields {
		known[f.Name], known[members.Fold(f.Name)] = true, true
	}
	return known
}

// Merge applies a change to a stored document (see driver.Codec): what T
// changed, from base to mine, is written over stored, and everything else
// in stored stays as it is, at any depth (package internal/members'
// Merge: names matched as encoding/json matches them; arrays element by
// element). It sends no separate changes: blobs and memstore store whole
// documents. A stored document holding a member twice in one object
// (written by another program) is refused with ErrInvalidInput naming it.
func (jsonCodec) Merge(stored, base, mine []byte) (data, changes []byte, err error) {
	if bytes.Equal(stored, base) {
		return mine, nil, nil
	}
	if path := members.Repeated(stored); path != "" {
		return nil, nil, repeatedError(path)
	}
	return members.Merge(stored, base, mine), nil, nil
}

// repeatedError is the refusal of a write over a stored document that
// holds the member at path twice: encoding/json reads it as one value made
// of every occurrence, which no change can be applied to without dropping
// some of it.
func repeatedError(path string) error {
	return fmt.Errorf("%w: the stored document holds %q twice, which a read joins into one value: a write would drop what the read did not show (replace it whole with a Doc built by hand)", ErrInvalidInput, path)
}

// FoldsNames reports that encoding/json decodes a member into the field
// whose name matches it exactly or else folded: "Title" is a field tagged
// "title", so it is the type's member, not one it does not know.
func (jsonCodec) FoldsNames() bool { return true }

// marshalJSON is JSON's Marshal: encoding/json, after a check for what it
// would change silently, and with the field named when it refuses a value
// (the check is internal/fields' Plan).
func marshalJSON(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return json.Marshal(v) // null
	}
	p := fields.PlanOf(rv.Type())
	if p.Suspect(rv) {
		return nil, invalidValue(p, rv, "it holds text that is not valid UTF-8")
	}
	data, err := json.Marshal(v)
	if err != nil {
		if pr := p.Locate(rv); pr != nil {
			return nil, &InvalidValueError{Field: pr.Field, Reason: pr.Reason}
		}
		if sentinelOf(err) != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if p.Raw() && !utf8.Valid(data) {
		return nil, invalidValue(p, rv, "a json.Marshaler in it wrote invalid UTF-8")
	}
	return data, nil
}

// invalidValue is the error for rv, in which something was found: the
// first problem located, or reason for the whole value.
func invalidValue(p *fields.Plan, rv reflect.Value, reason string) *InvalidValueError {
	if pr := p.Locate(rv); pr != nil {
		return &InvalidValueError{Field: pr.Field, Reason: pr.Reason}
	}
	return &InvalidValueError{Reason: reason}
}

func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// encode encodes v; a value the codec refuses (NaN under JSON, say)
// matches ErrInvalidInput, unless the codec's error already matches one of
// the package's sentinels. Nothing is sent.
func (s *Store[T]) encode(key string, v T) ([]byte, error) {
	if t := reflect.TypeFor[T](); t.Kind() == reflect.Interface {
		if tc, ok := s.codec.(typeChecker); ok {
			if err := tc.CheckType(t); err != nil {
				return nil, encodeError(key, err)
			}
		}
	}
	data, err := s.codec.Marshal(v)
	if err != nil {
		return nil, encodeError(key, err)
	}
	return data, nil
}

func encodeError(key string, err error) error {
	if sentinelOf(err) != nil {
		return prefixed("encode", key, err)
	}
	return fmt.Errorf("%w: encode %q: %v", ErrInvalidInput, key, err)
}

// decodeDoc is the Doc of it, a stored document. With a codec that merges,
// its Extra holds the document when T does not encode it exactly as
// stored, so that a Replace of the Doc applies its change to it.
func (s *Store[T]) decodeDoc(it driver.Item) (Doc[T], error) {
	if s.merger == nil {
		var v T
		if err := s.codec.Unmarshal(it.Data, &v); err != nil {
			return Doc[T]{}, decodeError(it.Key, err)
		}
		return Doc[T]{Key: it.Key, Value: v, ETag: it.ETag, Extra: Extra{meta: it.Meta}}, nil
	}
	v, baseline, err := s.startFrom(version{Item: it, Exists: true})
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: it.Key, Value: *v, ETag: it.ETag, Extra: s.extraOf(it, baseline)}, nil
}

// decode is decodeDoc's Doc of it, a stored document, with its expiry
// (Doc.Expires): one that has expired by the Store's clock is an
// *expiredError (ErrNotFound), which a listing skips (isExpired).
func (s *Store[T]) decode(it driver.Item) (Doc[T], error) {
	d, err := s.decodeDoc(it)
	if err != nil || s.life == nil {
		return d, err
	}
	return s.idx.stamped(d, s.life)
}

// decodeError reports a stored document the codec cannot decode into T.
// It matches ErrInvalidInput (the stored bytes are not a T), unless the
// codec's error already matches one of the package's sentinels; the
// codec's error stays in the chain for errors.As.
func decodeError(key string, err error) error {
	if sentinelOf(err) != nil {
		return prefixed("decode", key, err)
	}
	return fmt.Errorf("%w: decode %q: %w", ErrInvalidInput, key, err)
}

// startFrom decodes the base version b into a fresh value for a mutation,
// and returns the encoding an unchanged value would have, taken before the
// mutation runs (it may change maps or pointers the value shares). A codec
// that can build that encoding while it decodes (a baseDecoder) is asked
// to, so that the value is not encoded a second time.
func (s *Store[T]) startFrom(b version) (v *T, baseline []byte, err error) {
	v = new(T)
	if !b.Exists {
		return v, nil, nil
	}
	bd, decodes := s.codec.(baseDecoder)
	switch {
	case b.Canonical || !decodes:
		err = s.codec.Unmarshal(b.Data, v)
	default:
		baseline, err = bd.Decode(b.Data, v)
	}
	if err != nil {
		return v, nil, decodeError(b.Key, err)
	}
	if b.Canonical {
		return v, b.Data, nil
	}
	if baseline == nil {
		baseline, err = s.encode(b.Key, *v)
	}
	return v, baseline, err
}

// baseDecoder is a Codec whose Decode is Unmarshal that also returns what
// Marshal returns for the value decoded, or nil when Marshal would refuse
// it (tablestore's EntityCodec, which reuses the bytes it decodes).
type baseDecoder interface {
	Decode(data []byte, v any) ([]byte, error)
}

// written is what a write of data, T's encoding of a changed value, stores
// over b, the version the change started from, whose value T encodes as
// baseline (nil: not at hand): the change applied to b's document (the
// codec's Merge), with the changes a merging backend sends. canonical says
// the document is data itself.
type written struct {
	data, changes []byte
	canonical     bool
}

// apply applies data, the new encoding of b's value, to b (see written).
// A codec that cannot merge writes data whole.
func (s *Store[T]) apply(b version, baseline, data []byte) (written, error) {
	if !b.Exists || b.Data == nil || s.merger == nil {
		return written{data: data, canonical: true}, nil
	}
	switch {
	case baseline != nil:
	case b.Canonical:
		baseline = b.Data
	default:
		var err error
		if _, baseline, err = s.startFrom(b); err != nil {
			return written{}, err
		}
	}
	out, changes, err := s.merger.Merge(b.Data, baseline, data)
	if err != nil {
		return written{}, encodeError(b.Key, err)
	}
	return written{data: out, changes: changes, canonical: bytes.Equal(out, data)}, nil
}
