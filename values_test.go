package etagstore_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// upper is a TextMarshaler; json writes its text as a string.
type upper string

func (u upper) MarshalText() ([]byte, error) { return []byte("<" + string(u) + ">"), nil }

// rawJSON is a json.Marshaler that writes its bytes as a JSON string as
// they are.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(`"` + string(r) + `"`), nil }

type valInner struct {
	Name  string
	Score float64
}

type valEmbedded struct {
	Promoted string
}

type valDoc struct {
	valEmbedded
	Title   string
	Renamed string `json:"renamed"`
	Skipped string `json:"-"`
	hidden  string
	Bytes   []byte
	Inner   valInner
	Ptr     *valInner
	List    []string
	Array   [2]string
	Map     map[string]string
	Deep    map[string][]valInner
	Any     any
	F32     float32
	When    time.Time
	Text    upper
	Raw     rawJSON
	Keys    map[upper]int
}

const bad = "a\xffb"

func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("err = %v, want ErrInvalidInput", err)
	}
	var iv *etagstore.InvalidValueError
	if !errors.As(err, &iv) {
		t.Fatalf("err = %T %v, want an *InvalidValueError", err, err)
	}
	if iv.Field != field {
		t.Fatalf("err = %v names field %q, want %q", err, iv.Field, field)
	}
	if field != "" && !strings.Contains(err.Error(), field) {
		t.Fatalf("message %q does not name %q", err, field)
	}
}

// TestJSONRefusesWhatItWouldChange: encoding/json replaces invalid UTF-8
// with U+FFFD without an error; the JSON codec refuses it instead and names
// where it is.
func TestJSONRefusesWhatItWouldChange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		doc   valDoc
		field string
	}{
		{"field", valDoc{Title: bad}, "Title"},
		{"renamed field", valDoc{Renamed: bad}, "renamed"},
		{"promoted field", valDoc{valEmbedded: valEmbedded{Promoted: bad}}, "Promoted"},
		{"nested struct", valDoc{Inner: valInner{Name: bad}}, "Inner.Name"},
		{"pointer", valDoc{Ptr: &valInner{Name: bad}}, "Ptr.Name"},
		{"slice", valDoc{List: []string{"ok", bad}}, "List[1]"},
		{"array", valDoc{Array: [2]string{bad}}, "Array[0]"},
		{"map value", valDoc{Map: map[string]string{"k": bad}}, `Map["k"]`},
		{"map key", valDoc{Map: map[string]string{bad: "v"}}, "Map"},
		{"deep map", valDoc{Deep: map[string][]valInner{"k": {{}, {Name: bad}}}}, `Deep["k"][1].Name`},
		{"interface", valDoc{Any: bad}, "Any"},
		{"interface map", valDoc{Any: map[string]any{"x": []any{1, bad}}}, `Any["x"][1]`},
		{"text marshaler", valDoc{Text: upper(bad)}, "Text"},
		{"text marshaler key", valDoc{Keys: map[upper]int{upper(bad): 1}}, "Keys"},
		{"json marshaler", valDoc{Raw: rawJSON(bad)}, "Raw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := etagstore.JSON.Marshal(tc.doc)
			if err == nil {
				t.Fatalf("Marshal = %s, nil; want an error", data)
			}
			wantInvalid(t, err, tc.field)
		})
	}
	// Pointers and interfaces on the outside too.
	_, err := etagstore.JSON.Marshal(&valDoc{Title: bad})
	wantInvalid(t, err, "Title")
	_, err = etagstore.JSON.Marshal(bad)
	wantInvalid(t, err, "")
	_, err = etagstore.JSON.Marshal([]any{map[string]any{"t": bad}})
	wantInvalid(t, err, `[0]["t"]`)
}

// TestJSONKeepsWhatComesBack: what comes back exactly is encoded as
// encoding/json does, invalid UTF-8 in fields json does not store included.
func TestJSONKeepsWhatComesBack(t *testing.T) {
	docs := []any{
		valDoc{Title: "é😀\u2028<>&", Skipped: bad, hidden: bad, Bytes: []byte(bad), Map: map[string]string{"ü": "ß"},
			Any: map[string]any{"n": 1.5, "s": "x"}, When: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Text: "t", Raw: "r", Keys: map[upper]int{"k": 1}},
		valDoc{},
		nil,
		[]byte(bad),
		map[int]string{1: "x"},
		(*valDoc)(nil),
	}
	for _, d := range docs {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := etagstore.JSON.Marshal(d)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", d, err)
		}
		if string(got) != string(want) {
			t.Errorf("Marshal = %s, want %s", got, want)
		}
	}
}

// TestJSONNamesNonFinite: NaN and ±Inf, which JSON cannot hold, are
// refused with the field named.
func TestJSONNamesNonFinite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		doc   valDoc
		field string
	}{
		{"NaN", valDoc{Inner: valInner{Score: math.NaN()}}, "Inner.Score"},
		{"+Inf", valDoc{F32: float32(math.Inf(1))}, "F32"},
		{"-Inf in a map", valDoc{Deep: map[string][]valInner{"k": {{Score: math.Inf(-1)}}}}, `Deep["k"][0].Score`},
		{"NaN in an interface", valDoc{Any: []any{math.NaN()}}, "Any[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := etagstore.JSON.Marshal(tc.doc)
			wantInvalid(t, err, tc.field)
		})
	}
}

// TestJSONNamesTimeOutOfRange: times JSON cannot write (years outside
// 0–9999) are refused with the field named.
func TestJSONNamesTimeOutOfRange(t *testing.T) {
	_, err := etagstore.JSON.Marshal(valDoc{When: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	wantInvalid(t, err, "When")
	_, err = etagstore.JSON.Marshal(valDoc{Ptr: nil, Any: []time.Time{{}, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}})
	wantInvalid(t, err, "Any[1]")
}

type node struct {
	Name string
	Next *node
}

// TestJSONDeepAndCyclic: a cycle is json's error, not a hang or a stack
// overflow; a long chain is checked to its end.
func TestJSONDeepAndCyclic(t *testing.T) {
	n := &node{Name: "loop"}
	n.Next = n
	if _, err := etagstore.JSON.Marshal(n); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Marshal(cycle) = %v, want ErrInvalidInput", err)
	}
	var head *node
	for i := range 1500 {
		name := "n"
		if i == 0 {
			name = bad
		}
		head = &node{Name: name, Next: head}
	}
	if _, err := etagstore.JSON.Marshal(head); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Marshal(1500 deep, invalid at the end) = %v, want ErrInvalidInput", err)
	}
	l := []any{nil}
	l[0] = l
	if _, err := etagstore.JSON.Marshal(l); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Marshal(cyclic slice) = %v, want ErrInvalidInput", err)
	}
}

// TestJSONCheckAllocatesNothing: the check adds no allocation to a plain
// document.
func TestJSONCheckAllocatesNothing(t *testing.T) {
	type doc struct {
		Title, Body string
		N           int64
		Tags        []string
		Attrs       map[string]string
		Inner       valInner
		Any         any
	}
	v := doc{Title: "t", Body: "some body text", N: 3, Tags: []string{"a", "b"}, Attrs: map[string]string{"k": "v"}, Any: map[string]any{"x": "y"}}
	// The least of several runs: under the race detector sync.Pool drops
	// items at random, so encoding/json's own count varies from run to run.
	least := func(f func()) float64 {
		n := testing.AllocsPerRun(100, f)
		for range 9 {
			n = min(n, testing.AllocsPerRun(100, f))
		}
		return n
	}
	var boxed any = v // boxed once: the race detector's build boxes at each call otherwise
	plain := least(func() { _, _ = json.Marshal(boxed) })
	checked := least(func() { _, _ = etagstore.JSON.Marshal(boxed) })
	slack := 0.0
	if raceBuild {
		slack = 1 // the race detector's build moves an iterator or two to the heap
	}
	if checked > plain+slack {
		t.Errorf("JSON.Marshal allocates %v times, encoding/json %v", checked, plain)
	}
}

// TestStoreRefusesBeforeSending: on a Store, the refusal names the field
// and nothing is written.
func TestStoreRefusesBeforeSending(t *testing.T) {
	s := etagstore.New[valDoc](memstore.New(nil), nil)
	ctx := t.Context()
	_, err := s.Create(ctx, "k", valDoc{List: []string{bad}})
	wantInvalid(t, err, "List[0]")
	if _, err := s.Get(ctx, "k"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Get after refused Create = %v, want ErrNotFound", err)
	}
	if _, err := s.Create(ctx, "k", valDoc{Title: "ok"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(ctx, "k", func(d *valDoc) error { d.Inner.Score = math.NaN(); return nil })
	wantInvalid(t, err, "Inner.Score")
	got, err := s.Get(ctx, "k")
	if err != nil || got.Value.Title != "ok" || got.Value.Inner.Score != 0 {
		t.Fatalf("Get after refused Update = %+v, %v", got.Value, err)
	}
}
