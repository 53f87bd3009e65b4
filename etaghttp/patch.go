package etaghttp

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/etagstore/etagstore/internal/fields"
)

// This file applies JSON merge patches (RFC 7396) on JSON text, member by
// member: a member the patch does not name is copied byte for byte, so a
// number keeps every digit (decoding into any would round it to float64).

// MergePatch applies an RFC 7396 JSON merge patch to doc: a member whose
// patch value is null is removed, an object is merged recursively, any
// other value replaces the member. Members are named exactly; those the
// patch does not name are copied byte for byte.
func MergePatch(doc, patch []byte) ([]byte, error) {
	if !json.Valid(doc) {
		return nil, errors.New("etaghttp: document: invalid JSON")
	}
	if !json.Valid(patch) {
		return nil, errors.New("etaghttp: patch: invalid JSON")
	}
	return mergeJSON(doc, patch, nil, 0)
}

// maxPatchDepth bounds how deeply a merge patch may nest objects.
const maxPatchDepth = 32

// mergeJSON merges patch into doc, both valid JSON, for a value of type t.
// When t is a struct, patch members name its fields the way encoding/json
// matches them (exactly, else case-insensitively); otherwise (maps, any,
// t nil) member names are compared exactly.
func mergeJSON(doc, patch []byte, t reflect.Type, depth int) ([]byte, error) {
	if !isObject(patch) {
		return patch, nil
	}
	if depth >= maxPatchDepth {
		// Each level decodes the level below again: bound the work.
		return nil, fmt.Errorf("the patch nests objects more than %d deep", maxPatchDepth)
	}
	var pm, dm map[string]json.RawMessage
	if err := json.Unmarshal(patch, &pm); err != nil {
		return nil, err
	}
	if isObject(doc) {
		if err := json.Unmarshal(doc, &dm); err != nil {
			return nil, err
		}
	} else {
		dm = map[string]json.RawMessage{}
	}
	fields := jsonFields(t)
	named := map[string]string{} // member of dm -> the patch member naming it
	for _, k := range slices.Sorted(maps.Keys(pm)) {
		name, ft := fields.resolve(k)
		if prev, dup := named[name]; dup {
			return nil, fmt.Errorf("patch members %q and %q both name %q", prev, k, name)
		}
		named[name] = k
		if isNull(pm[k]) {
			delete(dm, name)
			continue
		}
		merged, err := mergeJSON(dm[name], pm[k], ft, depth+1)
		if err != nil {
			return nil, err
		}
		dm[name] = merged
	}
	return encodeObject(dm), nil
}

// encodeObject writes members as a JSON object, values as they are.
func encodeObject(members map[string]json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(members)) {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		b.Write(name)
		b.WriteByte(':')
		b.Write(members[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

func isNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

// fieldSet is the JSON members of one type: struct fields by name, or the
// element type of a map.
type fieldSet struct {
	byName map[string]reflect.Type // nil: names are compared exactly
	names  []string                // in field order, for case-insensitive matches
	elem   reflect.Type
}

// resolve returns the member k names, and its type (nil when unknown).
func (f fieldSet) resolve(k string) (string, reflect.Type) {
	if f.byName == nil {
		return k, f.elem
	}
	if t, ok := f.byName[k]; ok {
		return k, t
	}
	for _, n := range f.names {
		if strings.EqualFold(n, k) {
			return n, f.byName[n]
		}
	}
	return k, nil // unknown: decoding refuses it by name
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// jsonFields returns the members of t as encoding/json decodes them (by
// fields.Of, in json's order, which its case-insensitive match follows).
func jsonFields(t reflect.Type) fieldSet {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil:
		return fieldSet{}
	case reflect.PointerTo(t).Implements(jsonUnmarshaler), reflect.PointerTo(t).Implements(textUnmarshaler):
		return fieldSet{} // decodes itself: names compared exactly
	case t.Kind() == reflect.Map:
		return fieldSet{elem: t.Elem()}
	case t.Kind() != reflect.Struct:
		return fieldSet{}
	}
	f := fieldSet{byName: map[string]reflect.Type{}}
	for _, sf := range fields.Of(t).Fields {
		f.byName[sf.Name] = sf.Type
		f.names = append(f.names, sf.Name)
	}
	return f
}

// decodeStrict decodes data, one JSON value, into a T: a member T has no
// field for, a null document or data after the value is an error.
func decodeStrict[T any](data []byte) (T, error) {
	var v T
	if isNull(data) {
		return v, errors.New("the document is null: send the whole document")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, errors.New("data after the document")
	}
	return v, nil
}

// patched returns cur with the merge patch applied.
func patched[T any](cur T, patch []byte) (T, error) {
	doc, err := json.Marshal(cur)
	if err != nil {
		return cur, err
	}
	doc, err = mergeJSON(doc, patch, reflect.TypeFor[T](), 0)
	if err != nil {
		return cur, err
	}
	return decodeStrict[T](doc)
}
