package etaghttp

import (
	"reflect"
	"testing"
)

type PatchBase struct{ A, B string }

type patchDoc struct {
	*PatchBase
	Base PatchBase `json:"base"`
	B    int
}

// TestMergeNamesFieldsAsJSONDoes: patch members name the fields
// encoding/json decodes, promoted ones (through an embedded pointer too)
// included, matched case-insensitively; a shallower field hides a
// promoted one of the same name.
func TestMergeNamesFieldsAsJSONDoes(t *testing.T) {
	for _, tc := range []struct{ doc, patch, want string }{
		{`{}`, `{"a":"x"}`, `{"A":"x"}`},
		{`{"B":1}`, `{"b":2}`, `{"B":2}`},
		{`{"base":{"A":"1","B":"2"}}`, `{"BASE":{"b":"y"}}`, `{"base":{"A":"1","B":"y"}}`},
	} {
		got, err := mergeJSON([]byte(tc.doc), []byte(tc.patch), reflect.TypeFor[patchDoc](), 0)
		if err != nil || string(got) != tc.want {
			t.Errorf("merge %s into %s = %s, %v; want %s", tc.patch, tc.doc, got, err, tc.want)
		}
	}
	v, err := patched(patchDoc{}, []byte(`{"a":"x","base":{"b":"y"}}`))
	if err != nil || v.PatchBase == nil || v.A != "x" || v.Base.B != "y" {
		t.Fatalf("patched = %+v, %v", v, err)
	}
}
