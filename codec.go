package etagstore

import (
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/extra"
)

// Codec turns documents into the bytes a Backend stores and back (see
// driver.Codec). JSON is the default; tablestore's EntityCodec maps struct
// fields to typed entity properties.
type Codec = driver.Codec

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

// jsonCodec is JSON: internal/codec's, whose refusal of a value is an
// *InvalidValueError.
type jsonCodec struct{ codec.JSON }

func (c jsonCodec) Marshal(v any) ([]byte, error) {
	data, err := c.JSON.Marshal(v)
	if iv, ok := err.(*codec.InvalidValue); ok {
		return nil, &InvalidValueError{Field: iv.Field, Reason: iv.Reason}
	}
	return data, err
}

// decodeDoc is the Doc of it, a stored document. With a codec that merges,
// its Extra holds the document when T does not encode it exactly as
// stored, so that a Replace of the Doc applies its change to it.
func (s *Store[T]) decodeDoc(it driver.Item) (Doc[T], error) {
	if !s.enc.Merges() {
		v, err := s.enc.Decode(it.Key, it.Data)
		if err != nil {
			return Doc[T]{}, err
		}
		return Doc[T]{Key: it.Key, Value: v, ETag: it.ETag, Extra: Extra{extra.Extra{Meta: it.Meta}}}, nil
	}
	v, baseline, err := s.enc.StartFrom(version{Item: it, Exists: true})
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: it.Key, Value: *v, ETag: it.ETag, Extra: s.extraOf(it, baseline)}, nil
}

// decode is decodeDoc's Doc of it, a stored document, with its expiry
// (Doc.Expires): one that has expired by the Store's clock is an
// *core.ExpiredError (ErrNotFound), which a listing skips (core.IsExpired).
func (s *Store[T]) decode(it driver.Item) (Doc[T], error) {
	d, err := s.decodeDoc(it)
	if err != nil || s.core.Life == nil {
		return d, err
	}
	return s.stamped(d)
}
