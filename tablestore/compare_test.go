package tablestore

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/etagstore/etagstore/driver"
)

// TestCompareKeys: the table's key order is PartitionKey, then RowKey,
// each by UTF-16 code units; it parts from driver.CompareKeys only where a
// partition extends another by a character below '/'.
func TestCompareKeys(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"a/x", "a/x", 0},
		{"a/x", "a/y", -1},
		{"a/y", "a-b/x", -1}, // driver.CompareKeys: +1
		{"a-b/x", "a/y", 1},
		{"a/zzz", "a!/a", -1},
		{"a/x", "a0/a", -1}, // '0' is above '/': the orders agree
		{"k😀/1", "k\uFFFD/1", -1},
		{"b/1", "a/9", 1},
	} {
		if got := compareKeys(tc.a, tc.b); got != tc.want {
			t.Errorf("compareKeys(%+q, %+q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	// Against the definition, on random keys of characters around '/'.
	alphabet := []rune{' ', '!', '-', '.', '0', 'a', 'é', '\uFFFD', '😀'}
	word := func() string {
		var sb strings.Builder
		for range 1 + rand.IntN(3) {
			sb.WriteRune(alphabet[rand.IntN(len(alphabet))])
		}
		return sb.String()
	}
	units := func(s string) []uint16 { return utf16.Encode([]rune(s)) }
	for range 20000 {
		pa, ra, pb, rb := word(), word(), word(), word()
		if rand.IntN(3) == 0 {
			pb = pa
		}
		want := slices.Compare(units(pa), units(pb))
		if want == 0 {
			want = slices.Compare(units(ra), units(rb))
		}
		if got := compareKeys(pa+"/"+ra, pb+"/"+rb); got != want {
			t.Fatalf("compareKeys(%+q, %+q) = %d, want %d", pa+"/"+ra, pb+"/"+rb, got, want)
		}
		differ := pa != pb && (strings.HasPrefix(pb, pa) && pb[len(pa)] < '/' || strings.HasPrefix(pa, pb) && pa[len(pb)] < '/')
		if same := driver.CompareKeys(pa+"/"+ra, pb+"/"+rb) == want; same == differ {
			t.Fatalf("%+q, %+q: the orders agree: %v, want %v", pa+"/"+ra, pb+"/"+rb, same, !differ)
		}
	}
}
