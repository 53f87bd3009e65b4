package docstore

// This file turns docstore documents into a tree of plain values and back
// (the encoder and decoder of gocloud.dev/docstore/driver). The tree holds
// nil, bool, string, int64, float64, []byte, time.Time, []any and
// map[string]any, and two markers: jsonHeld, a struct field held by
// pointer (which tablestore's EntityCodec keeps as JSON), and rawString, a
// table string property that no docstore write marked (it may hold the
// JSON of a field a tablestore.Store[T] wrote).

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"gocloud.dev/docstore/driver"

	"github.com/etagstore/etagstore"
)

// jsonHeld is a value a document held by pointer: tables keep it as the
// JSON of what it points to, as tablestore's EntityCodec does.
type jsonHeld struct{ v any }

// rawString is a table string property no docstore write marked as JSON.
type rawString string

var timeType = reflect.TypeFor[time.Time]()

// encodeDoc encodes doc as a map of plain values.
func encodeDoc(doc driver.Document) (map[string]any, error) {
	e := encoder{root: true}
	if err := doc.Encode(&e); err != nil {
		return nil, invalidf("encode: %v", err)
	}
	m, ok := e.val.(map[string]any)
	if !ok {
		return nil, invalidf("a document must encode as a map, not %T", e.val)
	}
	return m, nil
}

// encodeValue encodes one value (a Mod's, an increment's, a filter's).
func encodeValue(v any) (any, error) {
	e := encoder{}
	if err := driver.Encode(reflect.ValueOf(v), &e); err != nil {
		return nil, invalidf("encode: %v", err)
	}
	return unhold(e.val), nil
}

type encoder struct {
	val  any
	root bool // the document's own encoder
	top  bool // encoding a member of the document itself
}

func (e *encoder) EncodeNil()            { e.val = nil }
func (e *encoder) EncodeBool(x bool)     { e.val = x }
func (e *encoder) EncodeInt(x int64)     { e.val = x }
func (e *encoder) EncodeUint(x uint64)   { e.val = int64(x) } // as tablestore: two's complement above MaxInt64
func (e *encoder) EncodeBytes(x []byte)  { e.val = append([]byte{}, x...) }
func (e *encoder) EncodeFloat(x float64) { e.val = x }
func (e *encoder) EncodeString(x string) { e.val = x }
func (e *encoder) ListIndex(int)         {}
func (e *encoder) MapKey(string)         {}

// EncodeSpecial keeps times as they are and, for a member of the document,
// a non-nil pointer to anything but a marshaler as held JSON.
func (e *encoder) EncodeSpecial(v reflect.Value) (bool, error) {
	if v.Type() == timeType {
		e.val = v.Interface()
		return true, nil
	}
	if e.top && v.Kind() == reflect.Pointer && !v.IsNil() && !marshaler(v.Type()) {
		inner := encoder{}
		if err := driver.Encode(v.Elem(), &inner); err != nil {
			return true, err
		}
		e.val = jsonHeld{inner.val}
		return true, nil
	}
	return false, nil
}

var (
	binaryMarshalerType = reflect.TypeFor[encoding.BinaryMarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
)

func marshaler(t reflect.Type) bool {
	return t.Implements(binaryMarshalerType) || t.Implements(textMarshalerType) || t.Elem() == timeType
}

func (e *encoder) EncodeList(n int) driver.Encoder {
	s := make([]any, n)
	e.val = s
	return &listEncoder{s: s}
}

type listEncoder struct {
	encoder
	s []any
}

func (e *listEncoder) ListIndex(i int) { e.s[i] = e.val }

func (e *encoder) EncodeMap(n int) driver.Encoder {
	m := make(map[string]any, n)
	e.val = m
	return &mapEncoder{m: m, encoder: encoder{top: e.root}}
}

type mapEncoder struct {
	encoder
	m map[string]any
}

func (e *mapEncoder) MapKey(k string) { e.m[k] = e.val }

// unhold strips the jsonHeld markers from v (a value outside a document's
// top level, or one a JSON document stores plainly).
func unhold(v any) any {
	switch x := v.(type) {
	case jsonHeld:
		return unhold(x.v)
	case []any:
		for i := range x {
			x[i] = unhold(x[i])
		}
	case map[string]any:
		for k, e := range x {
			x[k] = unhold(e)
		}
	}
	return v
}

// decoder decodes a value of the tree into a document. It is lenient where
// a Store[T]'s own encoding differs: bytes from base64 strings, times from
// RFC 3339 strings, floats from integers, and a table string property
// that holds a field's JSON (tablestore.EntityCodec) into that field.
type decoder struct{ val any }

func (d decoder) String() string { return fmt.Sprint(d.val) }

func (d decoder) AsNull() bool { return d.val == nil }

func (d decoder) AsBool() (bool, bool) {
	b, ok := d.val.(bool)
	return b, ok
}

func (d decoder) AsString() (string, bool) {
	switch s := d.val.(type) {
	case string:
		return s, true
	case rawString:
		return string(s), true
	}
	return "", false
}

func (d decoder) AsInt() (int64, bool) {
	i, ok := d.val.(int64)
	return i, ok
}

func (d decoder) AsUint() (uint64, bool) {
	i, ok := d.val.(int64)
	return uint64(i), ok
}

func (d decoder) AsFloat() (float64, bool) {
	switch f := d.val.(type) {
	case float64:
		return f, true
	case int64:
		return float64(f), true
	}
	return 0, false
}

func (d decoder) AsBytes() ([]byte, bool) {
	if b, ok := d.val.([]byte); ok {
		return b, true
	}
	if s, ok := d.AsString(); ok {
		b, err := base64.StdEncoding.DecodeString(s)
		return b, err == nil
	}
	return nil, false
}

func (d decoder) AsInterface() (any, error) { return plain(d.val), nil }

// plain is v with its rawStrings as strings.
func plain(v any) any {
	switch x := v.(type) {
	case rawString:
		return string(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = plain(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e)
		}
		return out
	}
	return v
}

func (d decoder) ListLen() (int, bool) {
	s, ok := d.val.([]any)
	return len(s), ok
}

func (d decoder) DecodeList(f func(int, driver.Decoder) bool) {
	for i, e := range d.val.([]any) {
		if !f(i, decoder{e}) {
			return
		}
	}
}

func (d decoder) MapLen() (int, bool) {
	m, ok := d.val.(map[string]any)
	return len(m), ok
}

func (d decoder) DecodeMap(f func(string, driver.Decoder, bool) bool) {
	for k, v := range d.val.(map[string]any) {
		if !f(k, decoder{v}, true) {
			return
		}
	}
}

// AsSpecial decodes times (from time.Time or an RFC 3339 string) and, from
// a table string property no docstore write marked, a field that
// tablestore.EntityCodec keeps as JSON (see heldAsJSON).
func (d decoder) AsSpecial(v reflect.Value) (bool, any, error) {
	if v.Type() == timeType {
		switch x := d.val.(type) {
		case time.Time:
			return true, x, nil
		case string, rawString:
			s, _ := d.AsString()
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return true, nil, invalidf("%q is not a time", s)
			}
			return true, t, nil
		}
		return false, nil, nil
	}
	s, ok := d.val.(rawString)
	if !ok || !heldAsJSON(v.Type()) {
		return false, nil, nil
	}
	p := reflect.New(v.Type())
	if err := json.Unmarshal([]byte(s), p.Interface()); err != nil {
		return true, nil, invalidf("property holds no JSON of %s: %v", v.Type(), err)
	}
	return true, p.Elem().Interface(), nil
}

// heldAsJSON reports whether tablestore.EntityCodec keeps a field of type
// t as a string holding its JSON: everything but strings, booleans,
// numbers, []byte and time.Time. An interface field is held as JSON too,
// but a string decoded into an interface is taken as the string it is: it
// cannot be told from one.
func heldAsJSON(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return false
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Uint8
	case reflect.Interface:
		return false // a string to an interface: as it is
	}
	return t != timeType
}

// invalidf is an error matching etagstore.ErrInvalidInput
// (gcerrors.InvalidArgument).
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: docstore: "+format, append([]any{etagstore.ErrInvalidInput}, args...)...)
}
