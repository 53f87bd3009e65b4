package etagstore

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/memstore"
)

type exactInner struct {
	Name  string
	Score float64
	Arr   [3]int16
}

type exactDoc struct {
	Title   string
	Renamed string `json:"renamed"`
	Opt     int64  `json:",omitempty"`
	On      bool
	U8      uint8
	U64     uint64
	I       int
	F32     float32
	F64     float64
	Inner   exactInner
	Grid    [2][2]float64
}

type withPointer struct{ P *int }
type withSlice struct{ S []int }
type withMap struct{ M map[string]int }
type withAny struct{ A any }
type withHidden struct {
	N      int
	hidden int
}
type withEmbedded struct {
	exactInner
	N int
}
type withSkipped struct {
	N int
	S int `json:"-"`
}
type withString struct {
	N int `json:",string"`
}
type withOmitFloat struct {
	F float64 `json:",omitempty"`
}
type withOmitZero struct {
	N int `json:",omitzero"`
}
type withFoldTwins struct {
	Name string
	NAME string `json:"name"`
}
type withOddName struct {
	N int `json:"a-b"`
}
type textual int

func (textual) MarshalText() ([]byte, error) { return []byte("t"), nil }

type withTextual struct{ T textual }
type withTime struct{ At time.Time }
type unmarshals struct{ N int }

func (*unmarshals) UnmarshalJSON([]byte) error { return nil }

// exactType accepts the types whose every value JSON decodes to itself,
// and refuses every kind of type where some value would come back
// different or share memory with its copy.
func TestExactType(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{exactDoc{}, true},
		{exactInner{}, true},
		{0, true},
		{"", true},
		{[4]bool{}, true},
		{struct{}{}, true},
		{withPointer{}, false},
		{withSlice{}, false},
		{withMap{}, false},
		{withAny{}, false},
		{withHidden{}, false},
		{withEmbedded{}, false},
		{withSkipped{}, false},
		{withString{}, false},
		{withOmitFloat{}, false},
		{withOmitZero{}, false},
		{withFoldTwins{}, false},
		{withOddName{}, false},
		{withTextual{}, false},
		{withTime{}, false},
		{unmarshals{}, false},
		{complex(1, 2), false},
		{uintptr(0), false},
		{[]byte(nil), false},
	} {
		if got := exactType(reflect.TypeOf(tc.v), 0); got != tc.want {
			t.Errorf("exactType(%T) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if !exactValues(JSON, reflect.TypeFor[exactDoc]()) {
		t.Error("exactValues refuses an exact type with the JSON codec")
	}
	if exactValues(otherCodec{}, reflect.TypeFor[exactDoc]()) {
		t.Error("exactValues accepts a codec other than JSON")
	}
}

type otherCodec struct{ jsonCodec }

// Every value of an exact type that the Store would write (valid UTF-8,
// finite floats) decodes from its encoding to itself, bit for bit:
// random values, and the edges (-0, extremes of every kind, escapes).
func TestExactTypeRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	text := []string{"", "plain", "ünïcode ✓", "<&>\u2028\u2029\"\\/", "\x00\x1f", "🙂", "a\tb\nc"}
	floats := []float64{0, math.Copysign(0, -1), 1e-320, math.MaxFloat64, -math.SmallestNonzeroFloat64, 1.0 / 3, 123456789.125, 1e21, 1e-7}
	f32s := []float32{0, float32(math.Copysign(0, -1)), math.MaxFloat32, math.SmallestNonzeroFloat32, 1.0 / 3, 16777217}
	for i := range 2000 {
		d := exactDoc{
			Title: text[r.IntN(len(text))], Renamed: text[r.IntN(len(text))], Opt: r.Int64() >> r.IntN(64),
			On: r.IntN(2) == 1, U8: uint8(r.Uint32()), U64: r.Uint64(), I: int(r.Int64()) - int(r.Int64()),
			F32: float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))), F64: r.NormFloat64() * math.Pow(10, float64(r.IntN(600)-300)),
			Inner: exactInner{Name: text[r.IntN(len(text))], Score: floats[r.IntN(len(floats))], Arr: [3]int16{math.MinInt16, int16(r.Uint32()), math.MaxInt16}},
			Grid:  [2][2]float64{{floats[r.IntN(len(floats))], -floats[r.IntN(len(floats))]}, {r.Float64(), r.ExpFloat64()}},
		}
		if i%3 == 0 {
			d.F32, d.U64, d.I = f32s[r.IntN(len(f32s))], math.MaxUint64, math.MinInt
		}
		data, err := JSON.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back exactDoc
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !sameBits(reflect.ValueOf(d), reflect.ValueOf(back)) {
			t.Fatalf("%s decodes to %+v, not %+v", data, back, d)
		}
	}
}

// sameBits reports whether a and b hold the same bits (floats compared by
// their bits: -0 is not 0).
func sameBits(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameBits(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Array:
		for i := range a.Len() {
			if !sameBits(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}

// An Update of an exact type starts from the value kept beside the bytes
// the last Update wrote, not from decoding them; the kept value is a copy
// of its own, which neither a mutate that keeps its pointer nor the Doc
// returned can change.
func TestUpdateStartsFromKeptValue(t *testing.T) {
	ctx := t.Context()
	s := New[exactDoc](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "k", exactDoc{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	var leaked *exactDoc
	d, err := s.Update(ctx, "k", func(v *exactDoc) error { leaked = v; v.I = 1; return nil })
	if err != nil {
		t.Fatal(err)
	}
	leaked.I, d.Value.I = 99, 98 // the caller's own copies
	en, ok := s.cache.entry("k")
	kept, isT := en.value.(*exactDoc)
	if !ok || !isT || kept.I != 1 || kept == leaked {
		t.Fatalf("cache entry %+v: want a copy of its own of the value written (I = 1)", en)
	}
	if data, _ := JSON.Marshal(*kept); string(data) != string(en.Data) {
		t.Fatalf("kept value encodes to %s, the kept bytes are %s", data, en.Data)
	}
	if parsed := meta.Parse(en.Meta); !en.parsed || en.meta.String() != en.Meta ||
		en.meta.IDs != parsed.IDs || en.meta.Lineage != parsed.Lineage || en.meta.Seq != parsed.Seq || en.meta.Fence != parsed.Fence {
		t.Fatalf("kept bookkeeping %+v (parsed %v), want %+v", en.meta, en.parsed, parsed)
	}
	if _, err := s.Update(ctx, "k", func(v *exactDoc) error {
		if v.I != 1 {
			t.Errorf("mutate started from I = %d, want 1", v.I)
		}
		v.I++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The value path is the one taken: a kept value (planted, for the test)
	// is what mutate receives, without decoding the bytes.
	en, _ = s.cache.entry("k")
	planted := *en.value.(*exactDoc)
	planted.Title = "planted"
	s.cache.mu.Lock()
	s.cache.m["k"].value = &planted
	s.cache.mu.Unlock()
	if _, err := s.Update(ctx, "k", func(v *exactDoc) error {
		if v.Title != "planted" {
			t.Errorf("mutate started from Title %q: the kept value was not used", v.Title)
		}
		v.I++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A type that is not exact keeps no value: its Updates decode.
func TestInexactTypeKeepsNoValue(t *testing.T) {
	ctx := t.Context()
	s := New[withSlice](memstore.New(nil), nil)
	if _, err := s.Update(ctx, "k", func(v *withSlice) error { v.S = append(v.S, 1); return nil }, CreateIfMissing()); err != nil {
		t.Fatal(err)
	}
	if en, ok := s.cache.entry("k"); !ok || en.value != nil {
		t.Fatalf("cache entry %+v, %v: want one without a value", en, ok)
	}
}
