package etagstore

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
)

// Exact types: for some T, encoding/json decodes what it encodes of any
// value to that very value. For such a T, the version cache keeps, beside
// the bytes an Update of this Store wrote, a copy of the value it encoded
// into them, and the next Update starts from a copy of that value instead
// of decoding the bytes: the value mutate receives is the one decoding
// would have made, without the decoding. Only versions that are exactly
// the codec's bytes (a verbatim backend, no members T does not know) are
// kept so.

// exactValues reports whether a Store of T with codec c may keep values
// beside the bytes it wrote (see above): c is the JSON codec and T an
// exact type.
func exactValues(c Codec, t reflect.Type) bool {
	_, isJSON := c.(jsonCodec)
	return isJSON && exactType(t, 0)
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// exactType reports whether encoding/json decodes what it encodes of any
// value of t to that very value, bit for bit. t is exact when it is a
// bool, an integer or float kind (not uintptr or complex), a string (the
// Store refuses text that is not valid UTF-8, the one thing JSON would
// change), an array of an exact type, or a struct whose every field is
// exported, not embedded, of an exact type, stored under its own name (a
// tag may rename it, and say omitempty on a field that is not a float:
// -0.0 is empty, and would come back as 0), no two names equal under case
// folding; and when no type in it has a method of encoding/json's or
// encoding's marshaler or unmarshaler interfaces. Anything that holds a
// pointer, slice, map or interface is not: a copy of it would share them.
func exactType(t reflect.Type, depth int) bool {
	if depth > 8 || customCoded(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	case reflect.Array:
		return exactType(t.Elem(), depth+1)
	case reflect.Struct:
		return exactStruct(t, depth)
	}
	return false
}

// customCoded reports whether t or *t has a method of a marshaler or
// unmarshaler interface encoding/json calls.
func customCoded(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	for _, i := range []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler} {
		if t.Implements(i) || p.Implements(i) {
			return true
		}
	}
	return false
}

// exactStruct is exactType for a struct t.
func exactStruct(t reflect.Type, depth int) bool {
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous || !exactType(f.Type, depth+1) {
			return false
		}
		name, ok := exactName(f)
		folded := strings.ToLower(name)
		if !ok || names[folded] {
			return false
		}
		names[folded] = true
	}
	return true
}

// exactName is the name encoding/json stores f under, and whether its tag
// is one exactType accepts: a plain name (letters, digits, '_'), and no
// option but omitempty on a field that is not a float.
func exactName(f reflect.StructField) (string, bool) {
	tag, hasTag := f.Tag.Lookup("json")
	if !hasTag {
		return f.Name, true
	}
	name, opts, _ := strings.Cut(tag, ",")
	for _, r := range name {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return "", false
		}
	}
	float := f.Type.Kind() == reflect.Float32 || f.Type.Kind() == reflect.Float64
	if opts != "" && (opts != "omitempty" || float) {
		return "", false
	}
	if name == "" {
		name = f.Name
	}
	return name, true
}
