package members

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
)

type rItem struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}
type rDoc struct {
	A   int              `json:"a,omitempty"`
	L   []rItem          `json:"l"`
	I   []int            `json:"i"`
	M   map[string]rItem `json:"m"`
	P   *rItem           `json:"p"`
	Any any              `json:"any"`
}

func randItem(r *rand.Rand) rItem { return rItem{N: r.Intn(3), S: []string{"", "x", "y"}[r.Intn(3)]} }

func randDoc(r *rand.Rand) rDoc {
	var d rDoc
	d.A = r.Intn(2)
	for range r.Intn(4) {
		d.L = append(d.L, randItem(r))
	}
	for range r.Intn(4) {
		d.I = append(d.I, r.Intn(3))
	}
	if r.Intn(2) == 0 {
		d.M = map[string]rItem{}
		for range r.Intn(3) {
			d.M[string(rune('a'+r.Intn(3)))] = randItem(r)
		}
	}
	if r.Intn(2) == 0 {
		it := randItem(r)
		d.P = &it
	}
	return d
}

// decorate adds unknown members and reorders members of objects.
func decorate(r *rand.Rand, v any, isMap ...bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = decorate(r, e, k == "m" && len(isMap) == 0)
		}
		if !(len(isMap) > 0 && isMap[0]) && r.Intn(2) == 0 {
			x[fmt.Sprintf("u%d", r.Intn(9))] = r.Intn(5)
		}
		return x
	case []any:
		for i := range x {
			x[i] = decorate(r, x[i])
		}
	}
	return v
}

// TestMergeRandomDifferential: random documents, decorated with members the
// type does not know at every depth and with keys reordered, changed at
// random (reorders, shrinks, in-place changes, nil); the merge always
// decodes to exactly the type's change.
func TestMergeRandomDifferential(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	fails := 0
	for it := 0; it < 20000 && fails < 5; it++ {
		d := randDoc(r)
		canon, _ := json.Marshal(d)
		var g any
		json.Unmarshal(canon, &g)
		stored, _ := json.Marshal(decorate(r, g))
		var v rDoc
		if err := json.Unmarshal(stored, &v); err != nil {
			t.Fatal(err)
		}
		base, _ := json.Marshal(v)
		// mutate
		w := randDoc(r)
		switch r.Intn(6) {
		case 0:
			v.L = w.L
		case 1:
			if len(v.L) > 1 {
				v.L[0], v.L[1] = v.L[1], v.L[0]
			}
			if len(v.L) > 0 {
				v.L[len(v.L)-1].N++
			}
		case 2:
			v.I = w.I
		case 3:
			v.M = w.M
		case 4:
			v.P = w.P
			v.A = w.A
		case 5:
			if len(v.L) > 0 {
				v.L = v.L[1:]
			}
		}
		mine, _ := json.Marshal(v)
		merged := Merge(stored, base, mine)
		var got rDoc
		if err := json.Unmarshal(merged, &got); err != nil || !reflect.DeepEqual(got, v) {
			fails++
			t.Errorf("stored %s\nbase   %s\nmine   %s\nmerged %s", stored, base, mine, merged)
		}
	}
}
