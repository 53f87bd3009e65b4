package memstore

import (
	"testing"
	"unicode/utf8"

	"github.com/etagstore/etagstore/driver"
)

// boundaryRunes are the characters at the edges of UTF-8's length classes
// and of the range UTF-16 orders differently from code points.
var boundaryRunes = []rune{
	0, 'A', 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xefff, 0xf000, 0xfffd, 0xffff,
	0x10000, 0x3ffff, 0x40000, 0xfffff, 0x100000, 0x10ffff,
}

// compareKeys agrees with driver.CompareKeys on every pair of keys made of
// two boundary characters, and on a shared prefix before them.
func TestCompareKeysMatchesDriver(t *testing.T) {
	var keys []string
	for _, a := range boundaryRunes {
		keys = append(keys, string(a))
		for _, b := range boundaryRunes {
			keys = append(keys, string(a)+string(b), "k/"+string(a)+string(b))
		}
	}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := compareKeys(a, b), driver.CompareKeys(a, b); got != want {
				t.Fatalf("compareKeys(%+q, %+q) = %d, driver.CompareKeys says %d", a, b, got, want)
			}
		}
	}
}

// FuzzCompareKeys: compareKeys agrees with driver.CompareKeys on valid
// UTF-8, and is antisymmetric on any bytes.
func FuzzCompareKeys(f *testing.F) {
	f.Add("a\uffff", "a\U00010000")
	f.Add("\ue000x", "\ud7ffy")
	f.Add("ab", "a")
	f.Fuzz(func(t *testing.T, a, b string) {
		got := compareKeys(a, b)
		if got != -compareKeys(b, a) || (got == 0) != (a == b) {
			t.Fatalf("compareKeys(%+q, %+q) = %d, reversed %d", a, b, got, compareKeys(b, a))
		}
		if utf8.ValidString(a) && utf8.ValidString(b) {
			if want := driver.CompareKeys(a, b); got != want {
				t.Fatalf("compareKeys(%+q, %+q) = %d, driver.CompareKeys says %d", a, b, got, want)
			}
		}
	})
}
