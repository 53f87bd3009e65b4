package etagstore

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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

// meta is the Store's bookkeeping stored beside each document in
// Item.Meta: the ids of the last few writes, newest last. A write whose
// response was lost is recognised by finding its id there.
//
// Encoding: "w=" followed by the ids joined with ",". Ids are base32
// (lowercase, no padding), so the whole string is printable ASCII.
type meta struct {
	ids []string
}

func parseMeta(s string) meta {
	var m meta
	for field := range strings.SplitSeq(s, ";") {
		if v, ok := strings.CutPrefix(field, "w="); ok && v != "" {
			m.ids = strings.Split(v, ",")
		}
	}
	return m
}

func (m meta) String() string {
	if len(m.ids) == 0 {
		return ""
	}
	return "w=" + strings.Join(m.ids, ",")
}

func (m meta) has(id string) bool { return slices.Contains(m.ids, id) }

// then returns the meta of the next version: m's ids plus id, keeping the
// newest keep ids.
func (m meta) then(id string, keep int) meta {
	ids := append(slices.Clip(m.ids), id)
	if len(ids) > keep {
		ids = ids[len(ids)-keep:]
	}
	return meta{ids: ids}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newWriteID returns a random 80-bit id (16 characters).
func newWriteID() string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return idEncoding.EncodeToString(b[:])
}

func (s *Store[T]) encode(key string, v T) ([]byte, error) {
	data, err := s.codec.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("etagstore: encode %q: %w", key, err)
	}
	return data, nil
}

func (s *Store[T]) decode(it Item) (Doc[T], error) {
	var v T
	if err := s.codec.Unmarshal(it.Data, &v); err != nil {
		return Doc[T]{}, fmt.Errorf("etagstore: decode %q: %w", it.Key, err)
	}
	return Doc[T]{Key: it.Key, Value: v, ETag: it.ETag}, nil
}
