package members

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnknownAndAdd(t *testing.T) {
	known := Known{Names: map[string]bool{"Title": true, "N": true, "N@odata.type": true}}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"none", `{"Title":"a","N":"5","N@odata.type":"Edm.Int64"}`, ``},
		{"some", `{"Title":"a","Priority":3,"Tags":["x","}"],"Meta":{"a":{"b":"\"}"}},"N":1}`, `"Priority":3,"Tags":["x","}"],"Meta":{"a":{"b":"\"}"}}`},
		{"typed property", `{"Due":"2026-01-01T00:00:00Z","Due@odata.type":"Edm.DateTime"}`, `"Due":"2026-01-01T00:00:00Z","Due@odata.type":"Edm.DateTime"}`[:len(`"Due":"2026-01-01T00:00:00Z","Due@odata.type":"Edm.DateTime"`)]},
		{"spaces and escapes", "{ \"Ti\\u0074le\" : \"a\" ,\n \"x\\\"y\" : null , \"z\": -1.5e3 }", `"x\"y" : null,"z": -1.5e3`},
		{"empty", `{}`, ``},
		{"not an object", `[1,2]`, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(Unknown([]byte(tc.doc), known))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Unknown (-want +got):\n%s", diff)
			}
			merged := Add([]byte(`{"Title":"b"}`), []byte(got))
			var v map[string]any
			if err := json.Unmarshal(merged, &v); err != nil {
				t.Fatalf("Add made %s: %v", merged, err)
			}
			if got != "" && len(v) != 1+len(Names([]byte(got))) {
				t.Errorf("Add made %s, names %q", merged, Names([]byte(got)))
			}
		})
	}
	if got := string(Add([]byte(`{}`), []byte(`"a":1`))); got != `{"a":1}` {
		t.Errorf("Add to an empty object = %s", got)
	}
}

func TestUnknownAllocatesNothingWhenAllKnown(t *testing.T) {
	known := Known{Names: map[string]bool{"Title": true, "Body": true, "N": true, "L": true}, Fold: true}
	doc := []byte(`{"Title":"a","Body":"some text","N":-1.5e3,"L":[1,{"a":"}"}]}`)
	if n := testing.AllocsPerRun(100, func() { Unknown(doc, known) }); n != 0 {
		t.Errorf("Unknown allocated %v times for a document it knows", n)
	}
}

// With Fold a member is known as encoding/json would decode it into a
// field: "Title" and "TITLE" are the field tagged "title"; "Titles" is not.
func TestUnknownFolded(t *testing.T) {
	known := Known{Names: map[string]bool{"title": true, Fold("title"): true, "N": true, Fold("N"): true}, Fold: true}
	got := string(Unknown([]byte(`{"title":"b","Title":"a","TITLE":"c","Titles":1,"n":2,"K":3}`), known))
	if want := `"Titles":1,"K":3`; got != want {
		t.Errorf("Unknown = %s, want %s", got, want)
	}
	if exact := string(Unknown([]byte(`{"title":"b","Title":"a"}`), Known{Names: known.Names})); exact != `"Title":"a"` {
		t.Errorf("without Fold: %s", exact)
	}
}
