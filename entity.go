package etagstore

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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
// Item.Meta: the ids of the last few writes, newest last (a write whose
// response was lost is recognised by finding its id there), and the highest
// fencing token any write to the document has carried.
//
// Encoding: "w=" and the ids joined with ",", then ";f=" and the token
// when there is one. Ids are base32 (lowercase, no padding), so the whole
// string is printable ASCII.
type meta struct {
	ids   []string
	fence int64
}

func parseMeta(s string) meta {
	var m meta
	for field := range strings.SplitSeq(s, ";") {
		if v, ok := strings.CutPrefix(field, "w="); ok && v != "" {
			m.ids = strings.Split(v, ",")
		} else if v, ok := strings.CutPrefix(field, "f="); ok {
			m.fence, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m
}

func (m meta) String() string {
	var b strings.Builder
	if len(m.ids) > 0 {
		b.WriteString("w=")
		b.WriteString(strings.Join(m.ids, ","))
	}
	if m.fence > 0 {
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		b.WriteString("f=")
		b.WriteString(strconv.FormatInt(m.fence, 10))
	}
	return b.String()
}

func (m meta) has(id string) bool { return slices.Contains(m.ids, id) }

// then returns the meta of the next version, written with write id id and
// fencing token fence (0: none): m's ids plus id, keeping the newest keep
// ids, and the higher of the two tokens.
func (m meta) then(id string, keep int, fence int64) meta {
	ids := append(slices.Clip(m.ids), id)
	if len(ids) > keep {
		ids = ids[len(ids)-keep:]
	}
	return meta{ids: ids, fence: max(m.fence, fence)}
}

// fenceKey is the context key of a fencing token.
type fenceKey struct{}

// WithFence returns a context whose writes through a Store carry the
// fencing token token (from a lock such as blobstore's). A document records
// the highest token written to it; a write carrying a lower token is refused
// with ErrFenced. The check is made against the version read and committed
// with If-Match of that version, so it is atomic on every backend.
//
// Update, Save, Replace and Delete honour the token (Replace and Delete then
// read the document first); Create records it; Upsert, which checks nothing,
// refuses a fenced context with ErrInvalidInput.
func WithFence(ctx context.Context, token int64) context.Context {
	return context.WithValue(ctx, fenceKey{}, token)
}

// FenceFrom returns the fencing token carried by ctx, if any.
func FenceFrom(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(fenceKey{}).(int64)
	return t, ok
}

// checkFence refuses a write carrying token over a version whose meta
// records a higher one.
func checkFence(key string, stored meta, token int64) error {
	if stored.fence > token {
		return errorf(ErrFenced, "%q carries fencing token %d, the write only %d", key, stored.fence, token)
	}
	return nil
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
