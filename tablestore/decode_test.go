package tablestore_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// serviceLayout is data as the Table service and SDK hand an entity back:
// properties sorted by name, every value as encoding/json writes it after
// decoding into a map (numbers as float64), and finite Edm.Double values
// without their annotation (as Azurite answers).
func serviceLayout(t *testing.T, data []byte) []byte {
	t.Helper()
	var props map[string]any
	if err := json.Unmarshal(data, &props); err != nil {
		t.Fatal(err)
	}
	for name, v := range props {
		if base, ok := strings.CutSuffix(name, "@odata.type"); ok && v == "Edm.Double" {
			if _, str := props[base].(string); !str {
				delete(props, name)
			}
		}
	}
	out, err := json.Marshal(props)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDecodeGivesMarshal: Decode returns exactly what Marshal returns for
// the value it decoded, whether the entity is in Marshal's own layout, in
// the service's, or spelled some other way.
func TestDecodeGivesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	codec := tablestore.EntityCodec{}
	for i := range 300 {
		want := randomDoc(rng)
		data, err := codec.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		layouts := map[string][]byte{
			"marshal": data,
			"service": serviceLayout(t, data),
			"indented": func() []byte {
				var b bytes.Buffer
				_ = json.Indent(&b, data, "", "  ")
				return b.Bytes()
			}(),
		}
		for name, layout := range layouts {
			var got AllTypes
			base, err := codec.Decode(layout, &got)
			if err != nil {
				t.Fatalf("document %d, %s layout: Decode(%s): %v", i, name, layout, err)
			}
			if diff := cmp.Diff(want, got, nanEqual); diff != "" {
				t.Fatalf("document %d, %s layout: decoded (-want +got):\n%s", i, name, diff)
			}
			if again, _ := codec.Marshal(got); !bytes.Equal(base, again) {
				t.Fatalf("document %d, %s layout: Decode gave\n%s\nMarshal gives\n%s", i, name, base, again)
			}
		}
	}
}

// TestDecodeOnAzurite: entities read back from the service decode to what
// was written, with Marshal's encoding beside, and a string property comes
// back in the bytes Marshal writes (Decode copies it).
func TestDecodeOnAzurite(t *testing.T) {
	b := tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})
	s := tablestore.NewStore[AllTypes](b.Client(), &tablestore.Options{Partition: "p"}, nil)
	rng := rand.New(rand.NewPCG(10, 11))
	codec := tablestore.EntityCodec{}
	for i := range 40 {
		want := randomDoc(rng)
		want.S = randomText(rng)
		if _, err := s.Upsert(t.Context(), "k", want); err != nil {
			t.Fatal(err)
		}
		it, err := b.Read(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		var got AllTypes
		base, err := codec.Decode(it.Data, &got)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, nanEqual); diff != "" {
			t.Fatalf("document %d: (-want +got):\n%s", i, diff)
		}
		again, _ := codec.Marshal(got) // not want: the service keeps no -0
		if !bytes.Equal(base, again) {
			t.Fatalf("document %d: Decode gave\n%s\nMarshal gives\n%s", i, base, again)
		}
		s, _ := json.Marshal(want.S)
		if !bytes.Contains(it.Data, append([]byte(`"S":`), s...)) {
			t.Fatalf("document %d: %s came back in other bytes than encoding/json's: %s", i, s, it.Data)
		}
	}
}

func randomText(rng *rand.Rand) string {
	r := []rune("ab\x01\n\t\"\\/<>&\u2028é😀")
	var b strings.Builder
	for range rng.IntN(30) {
		b.WriteRune(r[rng.IntN(len(r))])
	}
	return b.String()
}

// noDoubles has a field of each kind whose values the service hands back
// in the bytes Marshal writes (Edm.Double values lose their annotation).
type noDoubles struct {
	S      string
	Other  string `json:"other_name"`
	ID     string `table:"guid"`
	B      bool
	I32    int32
	I64    int64
	U64    uint64
	When   time.Time
	Bytes  []byte
	Nested Inner
	List   []string
}

func randomNoDoubles(rng *rand.Rand) noDoubles {
	d := randomDoc(rng)
	return noDoubles{S: d.S + randomText(rng), Other: d.Renamed, ID: d.ID, B: d.B, I32: d.I32, I64: d.I64, U64: d.U64, When: d.When, Bytes: d.Bytes, Nested: d.Nested, List: d.List}
}

// sameBytes reports whether a and b are one slice (the same bytes in
// memory), not merely equal.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// TestDecodeReturnsServiceData: Marshal writes properties in the order of
// their names, as the SDK hands entities back, so an entity read is
// Marshal's encoding of its value and Decode returns it as it is, with
// nothing allocated for it; where the service's bytes differ (an Edm.Double
// without its annotation, a name sorting between a property and its
// annotation) Decode still returns Marshal's encoding, built.
func TestDecodeReturnsServiceData(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	codec := tablestore.EntityCodec{}
	for i := range 300 {
		want := randomNoDoubles(rng)
		data, err := codec.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		layout := serviceLayout(t, data)
		if !bytes.Equal(layout, data) {
			t.Fatalf("document %d: Marshal wrote\n%s\nthe service's layout is\n%s", i, data, layout)
		}
		var got noDoubles
		base, err := codec.Decode(layout, &got)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("document %d: decoded (-want +got):\n%s", i, diff)
		}
		if !sameBytes(base, layout) {
			t.Fatalf("document %d: Decode built %s rather than returning the data", i, base)
		}
	}
	type between struct {
		N  int64 // "N", "N1", "N@odata.type" in the service's order
		N1 string
		F  float64
	}
	v := between{N: 5, N1: "x", F: 1.5}
	data, _ := codec.Marshal(v)
	layout := serviceLayout(t, data)
	var got between
	base, err := codec.Decode(layout, &got)
	if err != nil || got != v || !bytes.Equal(base, data) || sameBytes(base, layout) {
		t.Fatalf("Decode(%s) = %s, %+v, %v; want %s, %+v, built", layout, base, got, err, data, v)
	}
}

// TestDecodeReturnsReadData: an entity read from the service through the
// Backend is returned by Decode as it is.
func TestDecodeReturnsReadData(t *testing.T) {
	b := tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})
	s := tablestore.NewStore[noDoubles](b.Client(), &tablestore.Options{Partition: "p"}, nil)
	rng := rand.New(rand.NewPCG(14, 15))
	for i := range 20 {
		want := randomNoDoubles(rng)
		if _, err := s.Upsert(t.Context(), "k", want); err != nil {
			t.Fatal(err)
		}
		it, err := b.Read(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		var got noDoubles
		base, err := tablestore.EntityCodec{}.Decode(it.Data, &got)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("document %d: (-want +got):\n%s", i, diff)
		}
		if !sameBytes(base, it.Data) {
			again, _ := tablestore.EntityCodec{}.Marshal(got)
			t.Fatalf("document %d: Decode built\n%s\nfrom\n%s\n(Marshal: %s)", i, base, it.Data, again)
		}
	}
}
