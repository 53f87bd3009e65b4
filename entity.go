package etagstore

// This file is the stored entity: a document (Doc) is its key, its value
// of type T and the ETag of the version it came from, and the codec turns
// T into the bytes a backend stores and back. Beside those bytes every
// stored document carries the Store's bookkeeping (recent write ids,
// lineage, fencing token: internal/meta) in driver.Item.Meta, which
// neither T nor the codec sees.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/fields"
	"github.com/etagstore/etagstore/internal/members"
)

// ETag is an opaque version token. Compare ETags only for equality: table
// ETags are weak (W/"datetime'…'") and blob ETags are quoted hex.
type ETag = driver.ETag

// ETagAny matches any existing version (If-Match: *). Passing it is the
// explicit last-writer-wins opt-out.
const ETagAny = driver.ETagAny

// Doc is a document with its key and the ETag of the version it came from.
//
// A Doc a write returns always has an ETag. When its value was never
// stored as a version of its own — an Update that was not the last of its
// group-commit batch (its state was committed together with the mutations
// that followed it), or a write whose response was lost, found committed
// with later writes after it — the ETag is a superseded one
// (driver.Superseded): it names that state and matches no stored version,
// so a Replace, Delete or Save with it is answered as any stale ETag is, a
// *ConflictError holding the current document (matching ErrConflict), and
// nothing it did not see is overwritten. Only a Doc built by hand has an
// empty ETag, which Replace and Delete refuse with ErrETagRequired.
//
// Extra holds what the stored document holds beyond T: members T does not
// know (written by a newer version of T during a deploy, or by another
// program), each with its value and, on tables, its type. Every write
// that starts from a read keeps them: Update, Save, Transact, table
// merges, and Replace of a Doc that Get, List, Page, Update, Save or
// Transact returned, which carries them here. Create, Upsert and Replace of
// a Doc built by hand (a zero Extra) write T alone: that is also how to
// drop unknown members on purpose, for the migration that removes a field
// (d.Extra = etagstore.Extra{}, then Replace). Extra also carries the
// bookkeeping of the version the Doc came from (write ids, lineage,
// fencing token), so that a Save from the Doc continues that version's
// history without reading it first.
type Doc[T any] struct {
	Key   string
	Value T
	ETag  ETag
	Extra Extra
}

// Extra is the members of a stored document that a Doc's T does not know,
// kept so that writing the Doc back does not erase them, and the
// bookkeeping of the version they came from. The zero Extra holds none.
// Equal (which go-cmp uses) compares the members; == compares the
// bookkeeping too, which is the same for every Doc of one version.
type Extra struct {
	raw  string // the members, as members.Unknown returns them
	meta string // the version's bookkeeping (driver.Item.Meta); "" when not known
}

// Empty reports whether e holds no members.
func (e Extra) Empty() bool { return len(e.raw) == 0 }

// Names returns the names of the members e holds (on tables, a typed
// property's type annotation is a member of its own, "Name@odata.type").
func (e Extra) Names() []string { return members.Names([]byte(e.raw)) }

// Equal reports whether e and o hold the same members.
func (e Extra) Equal(o Extra) bool { return e.raw == o.raw }

// extraOf is the Extra of a stored document under a codec whose member
// names for T are known (nil: every member is T's).
func extraOf(it driver.Item, known map[string]bool) Extra {
	return Extra{raw: string(members.Unknown(it.Data, known)), meta: it.Meta}
}

// knownMembers returns the member names codec stores for type t, or nil
// when codec cannot tell (see driver.Codec).
func knownMembers(codec Codec, t reflect.Type) map[string]bool {
	m, ok := codec.(interface {
		Members(reflect.Type) map[string]bool
	})
	if !ok {
		return nil
	}
	return m.Members(t)
}

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
		known[f.Name] = true
	}
	return known
}

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

func (s *Store[T]) decode(it driver.Item) (Doc[T], error) {
	var v T
	if err := s.codec.Unmarshal(it.Data, &v); err != nil {
		return Doc[T]{}, decodeError(it.Key, err)
	}
	return Doc[T]{Key: it.Key, Value: v, ETag: it.ETag, Extra: extraOf(it, s.known)}, nil
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

// prefixed is err, unwrapped to as it is, printed as
// `etagstore: op "key": …` with err's own "etagstore: " prefix left out, so
// that the prefix does not repeat: `etagstore: encode "k": too large: …`.
func prefixed(op, key string, err error) error {
	return &prefixedError{msg: fmt.Sprintf("etagstore: %s %q: %s", op, key, strings.TrimPrefix(err.Error(), "etagstore: ")), err: err}
}

type prefixedError struct {
	msg string
	err error
}

func (e *prefixedError) Error() string { return e.msg }
func (e *prefixedError) Unwrap() error { return e.err }
