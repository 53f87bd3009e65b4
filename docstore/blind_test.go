package docstore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBlindNative shows what drivertest's skipped BlindCodec/NativeEncode
// case meets: a value a Store[T] wrote into an interface field comes back,
// decoded into an interface, as what the stored text says — base64 for
// bytes, and on tables a string holding the field's JSON — while a
// struct field of the value's own type gets it exactly.
func TestBlindNative(t *testing.T) {
	type blind struct{ X any }
	type typed struct {
		X []byte
		N int
	}
	for _, tc := range []struct {
		name    string
		ct      interface{ NativeEncode(any) (any, error) }
		dec     func(v, dest any) error
		wantAny any
	}{
		{"json", jsonCodecTester{}, jsonCodecTester{}.DocstoreDecode, "AQI="},
		{"table", tableCodecTester{}, tableCodecTester{}.DocstoreDecode, `"AQI="`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := tc.ct.NativeEncode(&blind{X: []byte{1, 2}})
			if err != nil {
				t.Fatal(err)
			}
			var b blind
			if err := tc.dec(enc, &b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantAny, b.X); diff != "" {
				t.Errorf("bytes in an interface (-want +got):\n%s", diff)
			}
			enc, err = tc.ct.NativeEncode(&typed{X: []byte{1, 2}, N: 3})
			if err != nil {
				t.Fatal(err)
			}
			var got typed
			if err := tc.dec(enc, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(typed{X: []byte{1, 2}, N: 3}, got); diff != "" {
				t.Errorf("typed decode (-want +got):\n%s", diff)
			}
		})
	}
}
