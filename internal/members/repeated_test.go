package members

import "testing"

func TestRepeated(t *testing.T) {
	for doc, want := range map[string]string{
		`{}`:                  "",
		`{"A":1,"B":{"A":1}}`: "",
		`{"Addr":{"City":"x"},"Addr":{"Zip":"1"}}`:        "Addr",
		`{"Addr":{"City":"x","City":"y"}}`:                "Addr.City",
		`{"Items":[{"N":1},{"N":2,"N":3}]}`:               "Items[1].N",
		`[[{"a":1}],[{"b":1,"b":2}]]`:                     "[1][0].b",
		`{"S":"{\"A\":1,\"A\":2}"}`:                       "", // a string is no object
		`{"Title":1,"title":2}`:                           "", // names differ (folded pairs are Merge's to match)
		` { "A" : { "B" : 1 , "B" : 2 } } `:               "A.B",
		`{"A":[1,2,3],"B":[{"C":{"D":[{"E":0,"E":1}]}}]}`: "B[0].C.D[0].E",
	} {
		if got := Repeated([]byte(doc)); got != want {
			t.Errorf("Repeated(%s) = %q, want %q", doc, got, want)
		}
	}
}
