package etagstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"
)

// Codec turns documents into the bytes a Backend stores and back.
// Marshal must be deterministic (the same value gives the same bytes): Update
// skips the write when a mutation leaves the bytes unchanged.
// A Codec must be safe for concurrent use.
//
// A codec that can encode values it cannot decode into T (a table entity
// must be a struct) may also have a method CheckType(reflect.Type) error:
// when T is an interface type, Marshal only sees the dynamic type of the
// value, so the Store asks CheckType about T itself before encoding, and
// sends nothing if it refuses.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

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

func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// InvalidValueError reports a value in a document that a codec cannot
// store so that it comes back exactly. It matches ErrInvalidInput. Nothing
// was sent.
type InvalidValueError struct {
	// Field is the path of the value in the document, by the names the
	// codec stores fields under (JSON names): Title, Tags[2],
	// Attrs["k"], Items[0].At; empty for the document itself.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *InvalidValueError) Error() string {
	if e.Field == "" {
		return ErrInvalidInput.Error() + ": " + e.Reason
	}
	return ErrInvalidInput.Error() + ": field " + e.Field + ": " + e.Reason
}

// Unwrap makes the error match ErrInvalidInput.
func (e *InvalidValueError) Unwrap() error { return ErrInvalidInput }

// CheckKey is the validation every key passes before any backend's own
// rules: it must be non-empty, valid UTF-8, and free of control characters
// (U+0000–U+001F, U+007F–U+009F), which no Azure service accepts in a key.
// It returns an error matching ErrInvalidKey.
func CheckKey(key string) error {
	if key == "" {
		return errorf(ErrInvalidKey, "empty key")
	}
	if !utf8.ValidString(key) {
		return errorf(ErrInvalidKey, "key %q is not valid UTF-8", key)
	}
	for _, r := range key {
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) {
			return errorf(ErrInvalidKey, "key %q contains control character %U", key, r)
		}
	}
	return nil
}

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
		return fmt.Errorf("etagstore: encode %q: %w", key, err)
	}
	return fmt.Errorf("%w: encode %q: %v", ErrInvalidInput, key, err)
}

func (s *Store[T]) decode(it Item) (Doc[T], error) {
	var v T
	if err := s.codec.Unmarshal(it.Data, &v); err != nil {
		return Doc[T]{}, decodeError(it.Key, err)
	}
	return Doc[T]{Key: it.Key, Value: v, ETag: it.ETag}, nil
}

// decodeError reports a stored document the codec cannot decode into T.
func decodeError(key string, err error) error {
	return fmt.Errorf("etagstore: decode %q: %w", key, err)
}
