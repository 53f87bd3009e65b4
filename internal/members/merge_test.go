package members

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name, stored, base, mine, want string
	}{
		{"unchanged keeps stored bytes", `{"A": 1 ,"X":{"y":2}}`, `{"A":1}`, `{"A":1}`, `{"A": 1 ,"X":{"y":2}}`},
		{"top-level change keeps unknown", `{"A":1,"X":true}`, `{"A":1}`, `{"A":2}`, `{"A":2,"X":true}`},
		{"nested addition kept", `{"Addr":{"City":"a","Zip":"1"},"N":1}`, `{"Addr":{"City":"a"},"N":1}`, `{"Addr":{"City":"b"},"N":1}`, `{"Addr":{"City":"b","Zip":"1"},"N":1}`},
		{"unchanged nested kept when a sibling changes", `{"Addr":{"City":"a","Zip":"1"},"N":1}`, `{"Addr":{"City":"a"},"N":1}`, `{"Addr":{"City":"a"},"N":2}`, `{"Addr":{"City":"a","Zip":"1"},"N":2}`},
		{"element changed in place", `{"Items":[{"N":"a","Qty":1},{"N":"b","Qty":2}]}`, `{"Items":[{"N":"a"},{"N":"b"}]}`, `{"Items":[{"N":"a"},{"N":"c"}]}`, `{"Items":[{"N":"a","Qty":1},{"N":"c","Qty":2}]}`},
		{"elements moved keep theirs", `{"Items":[{"N":"a","Qty":1},{"N":"b","Qty":2}]}`, `{"Items":[{"N":"a"},{"N":"b"}]}`, `{"Items":[{"N":"b"},{"N":"a"}]}`, `{"Items":[{"N":"b","Qty":2},{"N":"a","Qty":1}]}`},
		{"element appended", `{"Items":[{"N":"a","Qty":1}]}`, `{"Items":[{"N":"a"}]}`, `{"Items":[{"N":"a"},{"N":"z"}]}`, `{"Items":[{"N":"a","Qty":1},{"N":"z"}]}`},
		{"element removed", `{"Items":[{"N":"a","Qty":1},{"N":"b","Qty":2}]}`, `{"Items":[{"N":"a"},{"N":"b"}]}`, `{"Items":[{"N":"b"}]}`, `{"Items":[{"N":"b","Qty":2}]}`},
		{"changed and length changed: as mine", `{"Items":[{"N":"a","Qty":1}]}`, `{"Items":[{"N":"a"}]}`, `{"Items":[{"N":"x"},{"N":"z"}]}`, `{"Items":[{"N":"x"},{"N":"z"}]}`},
		{"case-only rename replaced", `{"Title":"a","N":1}`, `{"title":"a","N":1}`, `{"title":"b","N":1}`, `{"title":"b","N":1}`},
		{"case-only rename unchanged kept", `{"Title":"a","N":1}`, `{"title":"a","N":1}`, `{"title":"a","N":2}`, `{"Title":"a","N":2}`},
		{"removed by mine", `{"A":1,"Owner":"x","X":0}`, `{"A":1,"Owner":"x"}`, `{"A":1}`, `{"A":1,"X":0}`},
		{"added by mine where stored had it empty", `{"Owner":"","X":0}`, `{}`, `{"Owner":"bob"}`, `{"Owner":"bob","X":0}`},
		{"type's unchanged member absent from stored stays absent", `{"A":1,"X":0}`, `{"A":1,"Zip":""}`, `{"A":2,"Zip":""}`, `{"A":2,"X":0}`},
		{"shape differs: mine", `{"A":"text"}`, `{"A":{}}`, `{"A":{"b":1}}`, `{"A":{"b":1}}`},
		{"map entry deleted and added", `{"M":{"a":1,"b":2}}`, `{"M":{"a":1,"b":2}}`, `{"M":{"a":1,"c":3}}`, `{"M":{"a":1,"c":3}}`},
		{"escaped names", `{"x\"y":1,"A":1}`, `{"A":1}`, `{"A":2}`, `{"x\"y":1,"A":2}`},
		{"duplicates of one member, changed", `{"title":"a","Title":"a","X":1}`, `{"title":"a"}`, `{"title":"b"}`, `{"title":"b","X":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(Merge([]byte(tc.stored), []byte(tc.base), []byte(tc.mine)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Merge (-want +got):\n%s", diff)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("invalid JSON %s", got)
			}
		})
	}
}

// Two versions of one document type: newer knows more, at every depth.
type oldItem struct {
	Name  string
	Price float64 `json:",omitempty"`
}

type oldDoc struct {
	Title string `json:"title"`
	N     int
	Owner string `json:",omitempty"`
	Addr  struct{ City string }
	Items []oldItem
	Tags  map[string]int
}

type newItem struct {
	Name  string
	Price float64 `json:",omitempty"`
	Qty   int
}

type newDoc struct {
	Title string
	N     int
	Owner string `json:",omitempty"`
	Addr  struct{ City, Zip string }
	Items []newItem
	Tags  map[string]int
	Since string
}

// TestMergeKeepsWhatTheOlderTypeDoesNotKnow: a newer version writes a
// document; the older one reads it and changes it at random; the merge
// decodes, as the older type, to exactly the older type's change, and, as
// the newer type, keeps every member the older one does not know: Since,
// Addr.Zip, and Qty of every item it left as it was.
func TestMergeKeepsWhatTheOlderTypeDoesNotKnow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		var nd newDoc
		nd.Title, nd.N, nd.Since, nd.Addr.City, nd.Addr.Zip = fmt.Sprint("t", r.IntN(3)), r.IntN(3), "2026", "c", "z"
		if r.IntN(2) == 0 {
			nd.Owner = "o"
		}
		for j := range r.IntN(4) {
			nd.Items = append(nd.Items, newItem{Name: fmt.Sprint("i", j), Price: float64(r.IntN(2)), Qty: 10 + j})
		}
		if r.IntN(2) == 0 {
			nd.Tags = map[string]int{"a": 1, "b": 2}
		}
		stored, _ := json.Marshal(nd)
		var od oldDoc
		if err := json.Unmarshal(stored, &od); err != nil {
			t.Fatal(err)
		}
		base, _ := json.Marshal(od)
		mutate(r, &od)
		mine, _ := json.Marshal(od)
		merged := Merge(stored, base, mine)
		var got oldDoc
		if err := json.Unmarshal(merged, &got); err != nil {
			t.Fatalf("case %d: %s: %v", i, merged, err)
		}
		if diff := cmp.Diff(od, got); diff != "" {
			t.Fatalf("case %d: the older type's change is not what it reads back (-want +got):\n%s\nstored %s\nbase %s\nmine %s\nmerged %s", i, diff, stored, base, mine, merged)
		}
		var gotNew newDoc
		if err := json.Unmarshal(merged, &gotNew); err != nil {
			t.Fatal(err)
		}
		if gotNew.Since != "2026" || gotNew.Addr.Zip != "z" {
			t.Fatalf("case %d: the newer type's members are lost: %s", i, merged)
		}
		for _, it := range gotNew.Items {
			for _, was := range nd.Items {
				if was.Name == it.Name && was.Price == it.Price && it.Qty != was.Qty {
					t.Fatalf("case %d: item %s left as it was lost its Qty: %s", i, it.Name, merged)
				}
			}
		}
	}
}

func mutate(r *rand.Rand, d *oldDoc) {
	for range r.IntN(3) + 1 {
		switch r.IntN(9) {
		case 0:
			d.Title += "x"
		case 1:
			d.N++
		case 2:
			d.Owner = []string{"", "p"}[r.IntN(2)]
		case 3:
			d.Addr.City += "y"
		case 4:
			d.Items = append(d.Items, oldItem{Name: "new"})
		case 5:
			if len(d.Items) > 0 {
				d.Items = d.Items[1:]
			}
		case 6:
			if len(d.Items) > 0 {
				d.Items[r.IntN(len(d.Items))].Price += 1
			}
		case 7:
			if len(d.Items) > 1 {
				d.Items[0], d.Items[1] = d.Items[1], d.Items[0]
			}
		case 8:
			if d.Tags == nil {
				d.Tags = map[string]int{}
			}
			d.Tags["c"] = 3
			delete(d.Tags, "a")
		}
	}
}
