package codec

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

// JSON is the default Codec's implementation (the root's JSON, whose
// doc says what it refuses): encoding/json, after a check for what it
// would change silently. Marshal's refusal of a value is an
// *InvalidValue, which the root makes its InvalidValueError.
type JSON struct{}

// InvalidValue is a value in a document that JSON cannot store so that
// it comes back exactly: Field is its path (empty for the document
// itself), Reason what is wrong with it.
type InvalidValue struct{ Field, Reason string }

func (e *InvalidValue) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%v: %s", driver.ErrInvalidInput, e.Reason)
	}
	return fmt.Sprintf("%v: field %s: %s", driver.ErrInvalidInput, e.Field, e.Reason)
}

func (e *InvalidValue) Unwrap() error { return driver.ErrInvalidInput }

// Marshal is encoding/json, after a check for what it would change
// silently, and with the field named when it refuses a value (the check
// is internal/fields' Plan).
func (JSON) Marshal(v any) ([]byte, error) {
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
			return nil, &InvalidValue{Field: pr.Field, Reason: pr.Reason}
		}
		if driver.SentinelOf(err) != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", driver.ErrInvalidInput, err)
	}
	if p.Raw() && !utf8.Valid(data) {
		return nil, invalidValue(p, rv, "a json.Marshaler in it wrote invalid UTF-8")
	}
	return data, nil
}

// invalidValue is the error for rv, in which something was found: the
// first problem located, or reason for the whole value.
func invalidValue(p *fields.Plan, rv reflect.Value, reason string) *InvalidValue {
	if pr := p.Locate(rv); pr != nil {
		return &InvalidValue{Field: pr.Field, Reason: pr.Reason}
	}
	return &InvalidValue{Reason: reason}
}

// Unmarshal is encoding/json's.
func (JSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Members returns the members encoding/json stores for a struct t (or a
// pointer to one); nil for other types, which know every member.
func (JSON) Members(t reflect.Type) map[string]bool {
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
func (JSON) Merge(stored, base, mine []byte) (data, changes []byte, err error) {
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
	return fmt.Errorf("%w: the stored document holds %q twice, which a read joins into one value: a write would drop what the read did not show (replace it whole with a Doc built by hand)", driver.ErrInvalidInput, path)
}

// FoldsNames reports that encoding/json decodes a member into the field
// whose name matches it exactly or else folded: "Title" is a field tagged
// "title", so it is the type's member, not one it does not know.
func (JSON) FoldsNames() bool { return true }
