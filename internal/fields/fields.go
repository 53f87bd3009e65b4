// Package fields holds encoding/json's rules for struct fields — which
// fields of a struct are stored and under which name — for every package
// that maps struct fields: the JSON codec's check of values (Plan, in
// this package), etaghttp's merge patch, and tablestore's entity
// properties.
//
// The rules are encoding/json's: an unexported field is skipped, except an
// embedded struct (or pointer to one), whose exported fields are promoted;
// a `json:"-"` tag skips a field (`json:"-,"` names it "-"); a tag's name,
// when it is a valid one, renames it; an embedded struct with no tag name
// is not a member itself, its fields are promoted into the struct holding
// it. Of several fields with one name, the shallowest wins, then the one
// named by a tag; two left at the same depth hide each other.
package fields

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// Field is a field of a struct that is stored, found by Of or Walk.
type Field struct {
	// Name is the member (or property) name.
	Name string
	// Index is the path to the field for reflect.Value.FieldByIndex,
	// through the embedded structs its holder promotes.
	Index []int
	// Type is the field's type.
	Type reflect.Type
	// GoName is the field's name in Go.
	GoName string
	// Tag is the field's whole struct tag.
	Tag reflect.StructTag
	// Tagged: Name comes from the json tag.
	Tagged bool
	// OmitEmpty and OmitZero: the json tag's omitempty and omitzero
	// options (encoding/json writes no member for such a field when its
	// value is empty, or zero).
	OmitEmpty, OmitZero bool
	// Exported: the field itself is exported. An unexported field is
	// stored only when it is an embedded struct named by its json tag.
	Exported bool
	// Indirect: Index goes through an embedded pointer, which may be nil
	// (FieldByIndex would panic; see Value).
	Indirect bool
}

// Value returns the field in v, a value of the struct type the field was
// found in, and false when a nil embedded pointer is on the way.
func (f *Field) Value(v reflect.Value) (reflect.Value, bool) {
	if !f.Indirect {
		return v.FieldByIndex(f.Index), true
	}
	for i, x := range f.Index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

// Clash is two fields with the same name at the same depth, of which
// encoding/json keeps at most one (the one named by a tag) and often
// neither.
type Clash struct {
	Name string
	A, B Field
}

// Struct is the stored fields of one struct type.
type Struct struct {
	// Fields are in the order of their Index paths (declaration order,
	// promoted fields where their embedded struct is).
	Fields []Field
	// Clashes are the names that several fields at one depth claim; the
	// field json keeps, if any, is in Fields.
	Clashes []Clash
}

// Promote decides whether the fields of the embedded struct field sf
// (whose type is a struct or a pointer to one) are promoted into the
// struct holding it; tagged says the json tag names sf. When it says no,
// sf is a field of its own.
type Promote func(sf reflect.StructField, tagged bool) bool

// JSON is encoding/json's rule: an embedded struct with no json name is
// promoted.
func JSON(_ reflect.StructField, tagged bool) bool { return !tagged }

var cache sync.Map // reflect.Type -> *Struct, under JSON

// Of returns the fields of struct type t that encoding/json stores, with
// the names it stores them under. The result is shared: do not modify it.
func Of(t reflect.Type) *Struct {
	if s, ok := cache.Load(t); ok {
		return s.(*Struct)
	}
	s, _ := cache.LoadOrStore(t, Walk(t, JSON))
	return s.(*Struct)
}

// Walk returns the fields of struct type t by encoding/json's rules,
// except that promote decides which embedded structs are promoted.
func Walk(t reflect.Type, promote Promote) *Struct {
	w := walker{promote: promote, visited: map[reflect.Type]bool{}}
	next, count := []level{{typ: t}}, map[reflect.Type]int{}
	for len(next) > 0 {
		next, count = w.level(next, count)
	}
	return w.dominant()
}

// level is an embedded struct to scan, at Index and through a pointer or
// not.
type level struct {
	typ      reflect.Type
	index    []int
	indirect bool
}

type walker struct {
	promote Promote
	visited map[reflect.Type]bool // struct types scanned at an earlier depth
	found   []Field
}

// level scans the structs of one depth, of which count says how often
// each was embedded, and returns those of the next depth and their counts.
func (w *walker) level(current []level, count map[reflect.Type]int) ([]level, map[reflect.Type]int) {
	var next []level
	queued := map[reflect.Type]int{}
	for _, l := range current {
		if w.visited[l.typ] {
			continue
		}
		w.visited[l.typ] = true
		for i := range l.typ.NumField() {
			f, embed, ok := w.field(l, i)
			switch {
			case !ok:
			case embed:
				if queued[f.Type]++; queued[f.Type] == 1 {
					next = append(next, level{typ: f.Type, index: f.Index, indirect: f.Indirect})
				}
			default:
				w.found = append(w.found, f)
				if count[l.typ] > 1 {
					// The same struct twice at this depth: its fields
					// hide each other.
					w.found = append(w.found, f)
				}
			}
		}
	}
	return next, queued
}

// field applies the rules to field i of l.typ: whether it is stored (ok),
// and whether it is an embedded struct whose fields are promoted (embed,
// with f.Type the struct type).
func (w *walker) field(l level, i int) (f Field, embed, ok bool) {
	sf := l.typ.Field(i)
	ft := sf.Type
	if ft.Name() == "" && ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	if !sf.IsExported() && !(sf.Anonymous && ft.Kind() == reflect.Struct) {
		return f, false, false // unexported; an embedded struct may promote exported fields
	}
	tag := sf.Tag.Get("json")
	if tag == "-" {
		return f, false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if !validName(name) {
		name = ""
	}
	var omitEmpty, omitZero bool
	for o := range strings.SplitSeq(opts, ",") {
		omitEmpty, omitZero = omitEmpty || o == "omitempty", omitZero || o == "omitzero"
	}
	f = Field{
		Name:      name,
		Index:     append(slices.Clip(l.index), i),
		Type:      sf.Type,
		GoName:    sf.Name,
		Tag:       sf.Tag,
		Tagged:    name != "",
		OmitEmpty: omitEmpty,
		OmitZero:  omitZero,
		Exported:  sf.IsExported(),
		Indirect:  l.indirect,
	}
	if sf.Anonymous && ft.Kind() == reflect.Struct && w.promote(sf, f.Tagged) {
		f.Type, f.Indirect = ft, l.indirect || sf.Type.Kind() == reflect.Pointer
		return f, true, true
	}
	if f.Name == "" {
		f.Name = sf.Name
	}
	return f, false, true
}

// validName is encoding/json's test of a tag's name: letters, digits and
// punctuation other than quotes, backslash and comma.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// dominant keeps, of the fields found with one name, the one
// encoding/json keeps: the shallowest, then the tagged one; two left at
// one depth hide each other and are a Clash.
func (w *walker) dominant() *Struct {
	fs := w.found
	slices.SortStableFunc(fs, func(a, b Field) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.Index), len(b.Index)); c != 0 {
			return c
		}
		if a.Tagged != b.Tagged {
			if a.Tagged {
				return -1
			}
			return +1
		}
		return slices.Compare(a.Index, b.Index)
	})
	s := &Struct{}
	for i := 0; i < len(fs); {
		j := i + 1
		for j < len(fs) && fs[j].Name == fs[i].Name {
			j++
		}
		same := fs[i:j]
		if len(same) > 1 && len(same[0].Index) == len(same[1].Index) {
			s.Clashes = append(s.Clashes, Clash{Name: same[0].Name, A: same[0], B: same[1]})
		}
		if len(same) == 1 || len(same[0].Index) < len(same[1].Index) || same[0].Tagged != same[1].Tagged {
			s.Fields = append(s.Fields, same[0])
		}
		i = j
	}
	slices.SortFunc(s.Fields, func(a, b Field) int { return slices.Compare(a.Index, b.Index) })
	return s
}
