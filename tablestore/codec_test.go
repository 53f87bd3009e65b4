package tablestore_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

type Inner struct {
	A string
	B []int
}

// AllTypes has a field of every kind the codec maps.
type AllTypes struct {
	S       string
	Renamed string `json:"other_name"`
	Skipped string `json:"-"`
	ID      string `table:"guid"`
	B       bool
	I8      int8
	I16     int16
	I32     int32
	U8      uint8
	U16     uint16
	I       int
	I64     int64
	U       uint
	U32     uint32
	U64     uint64
	F32     float32
	F64     float64
	When    time.Time
	Bytes   []byte
	Nested  Inner
	Ptr     *Inner
	List    []string
	Map     map[string]int
	Any     any
}

var nanEqual = cmpopts.EquateNaNs()

func randomDoc(rng *rand.Rand) AllTypes {
	str := func() string {
		const alphabet = "abc'\"\\/#?%&= é€😀\u00a0{}[]"
		r := []rune(alphabet)
		var b strings.Builder
		for range rng.IntN(20) {
			b.WriteRune(r[rng.IntN(len(r))])
		}
		return b.String()
	}
	floats := []float64{0, -0.5, 1, 3, 1e300, -1e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN(), rng.NormFloat64()}
	d := AllTypes{
		S: str(), Renamed: str(), B: rng.IntN(2) == 0,
		I8: int8(rng.Int()), I16: int16(rng.Int()), I32: int32(rng.Int()), U8: uint8(rng.Int()), U16: uint16(rng.Int()),
		I: rng.Int() - rng.Int(), I64: rng.Int64() - rng.Int64(), U: uint(rng.Uint64()), U32: rng.Uint32(), U64: rng.Uint64(),
		F32: float32(floats[rng.IntN(len(floats))]), F64: floats[rng.IntN(len(floats))],
		Nested: Inner{A: str(), B: []int{rng.Int()}},
		List:   []string{str(), str()},
	}
	switch rng.IntN(4) {
	case 0: // the zero time stays zero
	default:
		d.When = time.Date(1601+rng.IntN(8000), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e7)*100, time.UTC)
	}
	if rng.IntN(2) == 0 {
		d.ID = "0f8fad5b-d9cb-469f-a165-70867728950e"
	}
	if rng.IntN(2) == 0 {
		d.Bytes = make([]byte, rng.IntN(64))
		for i := range d.Bytes {
			d.Bytes[i] = byte(rng.Int())
		}
	}
	if rng.IntN(2) == 0 {
		d.Ptr = &Inner{A: str()}
	}
	if rng.IntN(2) == 0 {
		d.Map = map[string]int{str(): rng.Int()}
	}
	if rng.IntN(2) == 0 {
		d.Any = map[string]any{"k": str()}
	}
	return d
}

// TestEntityRoundTripOnAzurite is a property test against the real service:
// random documents of every supported type come back exactly.
func TestEntityRoundTripOnAzurite(t *testing.T) {
	s := tablestore.NewStore[AllTypes](azuritetest.NewTable(t), &tablestore.Options{Partition: "p"}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		want := randomDoc(rng)
		key := "doc" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if _, err := s.Upsert(t.Context(), key, want); err != nil {
			t.Fatalf("Upsert %+v: %v", want, err)
		}
		got, err := s.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got.Value, nanEqual); diff != "" {
			t.Fatalf("round trip of document %d (-want +got):\n%s", i, diff)
		}
	}
}

// FuzzEntityCodec checks the codec's round trip on its own (go test runs
// the seeds; go test -fuzz FuzzEntityCodec explores).
func FuzzEntityCodec(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(7), uint64(0))
	f.Add(uint64(12345), uint64(99))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		want := randomDoc(rand.New(rand.NewPCG(a, b)))
		data, err := tablestore.EntityCodec{}.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got AllTypes
		if err := (tablestore.EntityCodec{}).Unmarshal(data, &got); err != nil {
			t.Fatalf("Unmarshal(%s): %v", data, err)
		}
		if diff := cmp.Diff(want, got, nanEqual); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}

func TestCodecTypeAnnotations(t *testing.T) {
	data, err := tablestore.EntityCodec{}.Marshal(struct {
		N    int64
		F    float64
		I    int32
		When time.Time
		ID   string `table:"guid"`
		Bin  []byte
	}{N: 5, F: 3, I: 2, When: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), ID: "0f8fad5b-d9cb-469f-a165-70867728950e", Bin: []byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	// Properties in the order of their names, as the SDK sorts them.
	want := `{"Bin":"AQ==","Bin@odata.type":"Edm.Binary","F":3,"F@odata.type":"Edm.Double","I":2,` +
		`"ID":"0f8fad5b-d9cb-469f-a165-70867728950e","ID@odata.type":"Edm.Guid","N":"5","N@odata.type":"Edm.Int64",` +
		`"When":"2026-01-02T03:04:05.0000006Z","When@odata.type":"Edm.DateTime"}`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("entity JSON (-want +got):\n%s", diff)
	}
}

// manyFields returns a struct value with n string fields F0..Fn-1.
func manyFields(n int) any {
	fields := make([]reflect.StructField, n)
	for i := range fields {
		fields[i] = reflect.StructField{Name: "F" + string(rune('A'+i/26/26%26)) + string(rune('A'+i/26%26)) + string(rune('A'+i%26)), Type: reflect.TypeFor[string]()}
	}
	return reflect.New(reflect.StructOf(fields)).Elem().Interface()
}

func TestCodecLimits(t *testing.T) {
	type big struct {
		Name string
		Bin  []byte
	}
	type bins struct{ A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q []byte }
	full := make([]byte, tablestore.MaxPropertySize)
	tooMany := manyFields(tablestore.MaxProperties + 1)
	for _, tc := range []struct {
		name    string
		v       any
		want    error
		mention string
	}{
		{"string over 64 KiB as UTF-16", big{Name: strings.Repeat("é", 32<<10+1)}, etagstore.ErrTooLarge, "Name"},
		{"binary over 64 KiB", big{Bin: make([]byte, 64<<10+1)}, etagstore.ErrTooLarge, "Bin"},
		{"entity over 1 MiB", bins{full, full, full, full, full, full, full, full, full, full, full, full, full, full, full, full, full}, etagstore.ErrTooLarge, "as an entity"},
		{"too many properties", tooMany, etagstore.ErrTooLarge, "fields"},
		{"reserved PartitionKey", struct {
			P string `json:"PartitionKey"`
		}{}, etagstore.ErrInvalidInput, "PartitionKey"},
		{"reserved Timestamp", struct{ Timestamp time.Time }{}, etagstore.ErrInvalidInput, "Timestamp"},
		{"reserved meta", struct {
			M string `json:"etagstoreMeta"`
		}{}, etagstore.ErrInvalidInput, "etagstoreMeta"},
		{"odata name", struct {
			M string `json:"odata.etag"`
		}{}, etagstore.ErrInvalidInput, "odata.etag"},
		{"not an identifier", struct {
			M string `json:"my-field"`
		}{}, etagstore.ErrInvalidInput, "my-field"},
		{"time before 1601", struct{ When time.Time }{time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}, etagstore.ErrInvalidInput, "When"},
		{"bad guid", struct {
			ID string `table:"guid"`
		}{"nope"}, etagstore.ErrInvalidInput, "ID"},
		{"not a struct", 42, etagstore.ErrInvalidInput, "struct"},
		{"time after 9999", struct{ When time.Time }{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, etagstore.ErrInvalidInput, "When"},
		{"time after 9999 by 100 ns", struct{ When time.Time }{time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC).Add(100)}, etagstore.ErrInvalidInput, "When"},
		{"invalid UTF-8", struct{ S string }{"a\xffb"}, etagstore.ErrInvalidInput, "S"},
		{"invalid UTF-8 guid", struct {
			ID string `table:"guid"`
		}{"0f8fad5b-d9cb-469f-a165-70867728950\xff"}, etagstore.ErrInvalidInput, "ID"},
		{"invalid UTF-8 in a JSON field", AllTypes{Nested: Inner{A: "a\xffb"}}, etagstore.ErrInvalidInput, "field Nested.A"},
		{"invalid UTF-8 map key in a JSON field", AllTypes{Map: map[string]int{"a\xffb": 1}}, etagstore.ErrInvalidInput, "field Map"},
		{"NaN in a JSON field", struct{ Vals []float64 }{[]float64{1, math.NaN()}}, etagstore.ErrInvalidInput, "field Vals[1]"},
		{"time after 9999 in a JSON field", struct{ Log []struct{ At time.Time } }{[]struct{ At time.Time }{{}, {time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}, etagstore.ErrInvalidInput, "field Log[1].At"},
		{"nil document", (*Inner)(nil), etagstore.ErrInvalidInput, "nil"},
		{"an int", 42, etagstore.ErrInvalidInput, "not int"},
		{"a map", map[string]int{"a": 1}, etagstore.ErrInvalidInput, "not map[string]int"},
		{"a slice", []string{"a"}, etagstore.ErrInvalidInput, "not []string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tablestore.EntityCodec{}.Marshal(tc.v)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Marshal = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
	// Exactly at the limits is fine.
	if _, err := (tablestore.EntityCodec{}).Marshal(big{Name: strings.Repeat("é", 32<<10), Bin: make([]byte, 64<<10)}); err != nil {
		t.Errorf("Marshal at the property limits: %v", err)
	}
	if _, err := (tablestore.EntityCodec{}).Marshal(manyFields(tablestore.MaxProperties)); err != nil {
		t.Errorf("Marshal with %d fields: %v", tablestore.MaxProperties, err)
	}
}

// TestLimitsSendNothing: a refused document leaves the table untouched.
func TestLimitsSendNothing(t *testing.T) {
	type doc struct{ Bin []byte }
	s := tablestore.NewStore[doc](azuritetest.NewTable(t), &tablestore.Options{Partition: "p"}, nil)
	_, err := s.Create(t.Context(), "k", doc{Bin: make([]byte, 64<<10+1)})
	if !errors.Is(err, etagstore.ErrTooLarge) {
		t.Fatalf("Create = %v, want ErrTooLarge", err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Get after refused Create = %v, want ErrNotFound", err)
	}
	// At the limit, Azurite takes it.
	if _, err := s.Create(t.Context(), "k", doc{Bin: make([]byte, 64<<10)}); err != nil {
		t.Fatalf("Create at the limit: %v", err)
	}
}

// TestCodecPointerDocument: a document may be a pointer to a struct
// (NewStore[*Doc]): Unmarshal then gets a **Doc and allocates the struct.
func TestCodecPointerDocument(t *testing.T) {
	want := &Inner{A: "x", B: []int{1, 2}}
	data, err := tablestore.EntityCodec{}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got *Inner
	if err := (tablestore.EntityCodec{}).Unmarshal(data, &got); err != nil {
		t.Fatalf("Unmarshal into **Inner: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	// Through a Store, on a backend that keeps the entity JSON as it is.
	s := etagstore.New[*Inner](memstore.New(nil), &etagstore.Options{Codec: tablestore.EntityCodec{}})
	ctx := t.Context()
	if _, err := s.Create(ctx, "k", want); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Get(ctx, "k"); err != nil || !cmp.Equal(d.Value, want) {
		t.Fatalf("Get = %+v, %v; want %+v", d.Value, err, want)
	}
	d, err := s.Update(ctx, "k", func(p **Inner) error { (*p).A = "y"; return nil })
	if err != nil || d.Value.A != "y" {
		t.Fatalf("Update = %+v, %v", d.Value, err)
	}
}

// TestCodecRefusesUnreadableTypes: a Store whose documents the codec could
// write but not read back refuses them before anything is sent, naming the
// type: an interface type (Marshal sees only the dynamic value) or a
// non-struct.
func TestCodecRefusesUnreadableTypes(t *testing.T) {
	b := memstore.New(nil)
	opts := &etagstore.Options{Codec: tablestore.EntityCodec{}}
	ctx := t.Context()
	check := func(name string, err error, mention string) {
		t.Helper()
		if !errors.Is(err, etagstore.ErrInvalidInput) || !strings.Contains(err.Error(), mention) {
			t.Errorf("%s = %v, want ErrInvalidInput naming %s", name, err, mention)
		}
	}
	_, err := etagstore.New[any](b, opts).Create(ctx, "any", Inner{A: "x"})
	check("Store[any].Create(Inner)", err, "interface {}")
	_, err = etagstore.New[any](b, opts).Upsert(ctx, "any", &Inner{A: "x"})
	check("Store[any].Upsert(*Inner)", err, "interface {}")
	_, err = etagstore.New[int](b, opts).Create(ctx, "int", 1)
	check("Store[int].Create", err, "not int")
	_, err = etagstore.New[map[string]any](b, opts).Create(ctx, "map", map[string]any{"A": "x"})
	check("Store[map].Create", err, "not map[string]interface {}")
	_, err = etagstore.New[*Inner](b, opts).Create(ctx, "nil", nil)
	check("Store[*Inner].Create(nil)", err, "nil")
	for it, err := range b.List(ctx, "") {
		t.Errorf("refused documents were stored: %q, %v", it.Key, err)
	}
}

// TestValuesOnAzurite: the cases of issue 12 against the real service. A
// pointer document round-trips; what cannot be read back is refused and
// nothing is written.
func TestValuesOnAzurite(t *testing.T) {
	client := azuritetest.NewTable(t)
	ctx := t.Context()
	ps := tablestore.NewStore[*Inner](client, &tablestore.Options{Partition: "p"}, nil)
	if _, err := ps.Create(ctx, "ptr", &Inner{A: "x", B: []int{1}}); err != nil {
		t.Fatalf("Create(*Inner): %v", err)
	}
	if d, err := ps.Get(ctx, "ptr"); err != nil || d.Value == nil || d.Value.A != "x" {
		t.Fatalf("Get(*Inner) = %+v, %v", d, err)
	}
	if d, err := ps.Update(ctx, "ptr", func(p **Inner) error { (*p).A = "y"; return nil }); err != nil || d.Value.A != "y" {
		t.Fatalf("Update(*Inner) = %+v, %v", d, err)
	}

	s := tablestore.NewStore[AllTypes](client, &tablestore.Options{Partition: "p"}, nil)
	for name, doc := range map[string]AllTypes{
		"after9999": {When: time.Date(10000, 1, 2, 0, 0, 0, 0, time.UTC)},
		"utf8":      {S: "a\xffb"},
		"utf8json":  {List: []string{"a\xffb"}},
	} {
		if _, err := s.Create(ctx, name, doc); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Create(%s) = %v, want ErrInvalidInput", name, err)
		}
		if _, err := s.Get(ctx, name); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("Get(%s) after a refused Create = %v, want ErrNotFound", name, err)
		}
	}
	_, err := tablestore.NewStore[int](client, &tablestore.Options{Partition: "p"}, nil).Create(ctx, "int", 1)
	if !errors.Is(err, etagstore.ErrInvalidInput) || !strings.Contains(err.Error(), "int") {
		t.Errorf("Store[int].Create = %v, want ErrInvalidInput naming int", err)
	}
	_, err = tablestore.NewStore[any](client, &tablestore.Options{Partition: "p"}, nil).Create(ctx, "any", Inner{})
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("Store[any].Create = %v, want ErrInvalidInput", err)
	}
	for _, key := range []string{"int", "any"} {
		if _, err := s.Get(ctx, key); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("Get(%s) after a refused Create = %v, want ErrNotFound", key, err)
		}
	}
	// At the edges of Edm.DateTime, and NaN, everything comes back.
	for name, want := range map[string]AllTypes{
		"last":  {When: time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)},
		"first": {When: time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)},
		"nan":   {F64: math.NaN(), F32: float32(math.Inf(-1))},
		"text":  {S: "é€😀\u00a0\u2028"},
	} {
		if _, err := s.Create(ctx, name, want); err != nil {
			t.Fatalf("Create(%s): %v", name, err)
		}
		got, err := s.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got.Value, nanEqual); diff != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", name, diff)
		}
	}
}
