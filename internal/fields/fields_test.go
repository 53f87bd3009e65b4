package fields

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type (
	Base   struct{ A, B string }
	Other  struct{ B, C string }
	hidden struct{ H string }
	Deep   struct{ Base }
	Tagged struct {
		X string `json:"B"`
	}
	Cycle struct {
		*Cycle
		Z string
	}
	named string
)

// The types below cover encoding/json's rules; Of must list exactly the
// members json writes for them.
type (
	plain struct {
		S       string
		Renamed string `json:"r,omitempty"`
		Skipped string `json:"-"`
		Dash    string `json:"-,"`
		Bad     string `json:"a\"b"`
		Punct   string `json:"a-b.c"`
		low     string
	}
	promoted struct {
		Base
		S string
	}
	shallowWins struct {
		Base
		B string
	}
	annihilate struct {
		Base
		Other
	}
	tagWins struct {
		Base
		Tagged
	}
	twiceAtOneDepth struct {
		Base
		Deep
	}
	pointerEmbed struct {
		*Base
		S string
	}
	unexportedEmbed struct {
		hidden
		S string
	}
	unexportedPointerEmbed struct {
		*hidden
	}
	taggedEmbed struct {
		Base `json:"base"`
	}
	taggedUnexportedEmbed struct {
		hidden `json:"h"`
	}
	skippedEmbed struct {
		Base `json:"-"`
		S    string
	}
	nonStructEmbed struct {
		named
	}
	deeper struct {
		Deep
		Other
	}
	cycle struct {
		Cycle
	}
	D2        struct{ Other }
	deepClash struct {
		Deep
		D2
	}
)

// fill sets every field of f in v (a struct) to its own value, allocating
// embedded pointers on the way, and returns the members json should write.
func fill(t *testing.T, v reflect.Value, s *Struct) map[string]any {
	want := map[string]any{}
	for _, f := range s.Fields {
		fv := v
		for i, x := range f.Index {
			if i > 0 && fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					if !fv.CanSet() {
						t.Fatalf("%s: cannot allocate the way to %s", v.Type(), f.Name)
					}
					fv.Set(reflect.New(fv.Type().Elem()))
				}
				fv = fv.Elem()
			}
			fv = fv.Field(x)
		}
		switch fv.Kind() {
		case reflect.String:
			fv.SetString("v-" + f.Name)
			want[f.Name] = "v-" + f.Name
		default:
			want[f.Name] = nil // a struct or pointer: compared by presence
		}
	}
	return want
}

func TestOfIsWhatJSONWrites(t *testing.T) {
	for _, v := range []any{
		&plain{}, &promoted{}, &shallowWins{}, &annihilate{}, &tagWins{}, &twiceAtOneDepth{},
		&pointerEmbed{}, &unexportedEmbed{}, &unexportedPointerEmbed{&hidden{}}, &taggedEmbed{},
		&taggedUnexportedEmbed{}, &skippedEmbed{}, &nonStructEmbed{}, &deeper{}, &cycle{}, &deepClash{},
	} {
		rv := reflect.ValueOf(v).Elem()
		s := Of(rv.Type())
		want := fill(t, rv, s)
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		var got map[string]any
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		for k, w := range want {
			g, ok := got[k]
			if !ok || w != nil && g != w {
				t.Errorf("%T: Of lists %q = %v, json wrote %s", v, k, w, data)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%T: json wrote %q, Of does not list it (%s)", v, k, data)
			}
		}
		names := make([]string, len(s.Fields))
		for i, f := range s.Fields {
			names[i] = f.Name
		}
		if !slices.IsSortedFunc(s.Fields, func(a, b Field) int { return slices.Compare(a.Index, b.Index) }) {
			t.Errorf("%T: fields %v are not in index order", v, names)
		}
	}
}

func TestOfClashes(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string // "name:A/B" per clash
	}{
		{plain{}, ""},
		{shallowWins{}, ""},
		{annihilate{}, "B:B/B"},
		{tagWins{}, "B:X/B"},
		{twiceAtOneDepth{}, ""}, // Base.A at depth 1 hides Deep.Base.A
		{deeper{}, ""},          // Other.B at depth 1 hides Deep.Base.B
		{deepClash{}, "B:B/B"},  // Deep.Base.B and D2.Other.B, both at depth 2
	} {
		var got []string
		for _, c := range Of(reflect.TypeOf(tc.v)).Clashes {
			got = append(got, c.Name+":"+c.A.GoName+"/"+c.B.GoName)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%T: clashes %v, want %q", tc.v, got, tc.want)
		}
	}
}

func TestWalkKeepsPointersWhenAsked(t *testing.T) {
	byValue := func(sf reflect.StructField, _ bool) bool { return sf.IsExported() && sf.Type.Kind() == reflect.Struct }
	s := Walk(reflect.TypeFor[pointerEmbed](), byValue)
	if len(s.Fields) != 2 || s.Fields[0].Name != "Base" || s.Fields[0].Type != reflect.TypeFor[*Base]() || s.Fields[1].Name != "S" {
		t.Fatalf("fields %+v, want Base (*Base) and S", s.Fields)
	}
	s = Walk(reflect.TypeFor[taggedEmbed](), byValue)
	if len(s.Fields) != 2 || s.Fields[0].Name != "A" || s.Fields[1].Name != "B" {
		t.Fatalf("fields %+v, want A and B promoted", s.Fields)
	}
}

func TestValueStopsAtNilPointer(t *testing.T) {
	s := Of(reflect.TypeFor[pointerEmbed]())
	v := reflect.ValueOf(pointerEmbed{S: "s"})
	for _, f := range s.Fields {
		fv, ok := f.Value(v)
		switch f.Name {
		case "A", "B":
			if ok || !f.Indirect {
				t.Errorf("%s: ok %v, indirect %v; want a nil pointer on the way", f.Name, ok, f.Indirect)
			}
		case "S":
			if !ok || fv.String() != "s" {
				t.Errorf("S = %v, %v", fv, ok)
			}
		}
	}
}
