package tablestore_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/tablestore"
)

type Embedded struct {
	E1 string
	E2 int
}

type unexportedEmbedded struct{ U string }

type embedDoc struct {
	Embedded
	unexportedEmbedded
	Ptr *Embedded `json:"ptr"`
	S   string
	E1  string // hides Embedded.E1
}

type taggedEmbedDoc struct {
	Embedded `json:"emb"` // flattened all the same: a table rule
}

type pointerEmbedDoc struct {
	*Embedded
	S string
}

type tagClashDoc struct {
	X string
	Y string `json:"X"`
}

// properties is the property names of an encoded entity.
func properties(t *testing.T, v any) []string {
	t.Helper()
	data, err := tablestore.EntityCodec{}.Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(%T): %v", v, err)
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(data, &props); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range props {
		if !strings.Contains(k, "@") {
			names = append(names, k)
		}
	}
	return names
}

// TestEntityFieldRules: which fields become properties, by the rules the
// codec shares with encoding/json (fields.Walk) and the table's own rule
// for embedded structs: the fields of an exported struct embedded by value
// are properties, an embedded pointer is one property holding JSON, an
// unexported embedded struct is not stored.
func TestEntityFieldRules(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{embedDoc{Embedded: Embedded{E1: "hidden", E2: 2}, unexportedEmbedded: unexportedEmbedded{"u"}, Ptr: &Embedded{E1: "p"}, S: "s", E1: "e"}, "E1 E2 S ptr"},
		{taggedEmbedDoc{Embedded{E1: "a", E2: 1}}, "E1 E2"},
		{pointerEmbedDoc{Embedded: &Embedded{E1: "a"}, S: "s"}, "Embedded S"},
	} {
		got := properties(t, tc.v)
		slices.Sort(got)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%T: properties %v, want %s", tc.v, got, tc.want)
		}
		data, _ := tablestore.EntityCodec{}.Marshal(tc.v)
		back := reflect.New(reflect.TypeOf(tc.v))
		if err := (tablestore.EntityCodec{}).Unmarshal(data, back.Interface()); err != nil {
			t.Fatalf("%T: Unmarshal: %v", tc.v, err)
		}
		want := tc.v
		if d, ok := want.(embedDoc); ok {
			d.Embedded.E1, d.unexportedEmbedded = "", unexportedEmbedded{} // not stored
			want = d
		}
		if !reflect.DeepEqual(back.Elem().Interface(), want) {
			t.Errorf("%T: round trip %+v, want %+v", tc.v, back.Elem().Interface(), want)
		}
	}
	for _, v := range []any{tagClashDoc{}} {
		_, err := tablestore.EntityCodec{}.Marshal(v)
		if !errors.Is(err, etagstore.ErrInvalidInput) || !strings.Contains(err.Error(), `both map to property "X"`) {
			t.Errorf("%T: Marshal = %v, want ErrInvalidInput naming the clash", v, err)
		}
	}
}
