package etagstore

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Codec turns documents into the bytes a Backend stores and back.
// Marshal must be deterministic (the same value gives the same bytes): Update
// skips the write when a mutation leaves the bytes unchanged.
// A Codec must be safe for concurrent use.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the default Codec: encoding/json, which sorts map keys and so is
// deterministic.
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

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
	data, err := s.codec.Marshal(v)
	if err != nil {
		if sentinelOf(err) != nil {
			return nil, fmt.Errorf("etagstore: encode %q: %w", key, err)
		}
		return nil, fmt.Errorf("%w: encode %q: %v", ErrInvalidInput, key, err)
	}
	return data, nil
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
