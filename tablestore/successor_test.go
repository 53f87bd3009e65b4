package tablestore

import (
	"testing"
	"unicode/utf16"
)

// TestSuccessor: the upper bound of a prefix range, in the Table service's
// order (UTF-16 code units), for prefixes ending in characters at the
// edges of the surrogate range and of Unicode.
func TestSuccessor(t *testing.T) {
	for _, tc := range []struct {
		prefix, want string
		ok           bool
	}{
		{"ka", "kb", true},
		{"k\uD7FF", "k\U00010000", true}, // pairs (U+D800…) follow U+D7FF
		{"k\U0001F600", "k\U0001F601", true},
		{"k\U0001FBFF", "k\U0001FC00", true}, // low half grows
		{"k\U000103FF", "k\U00010400", true}, // low half at its end: the next high
		{"k\U0010FFFF", "k\uE000", true},     // U+E000 follows every pair
		{"k\uFFFF", "l", true},               // nothing follows U+FFFF
		{"k\uE000", "k\uE001", true},
		{"\uFFFF", "", false},
		{"", "", false},
	} {
		got, ok := successor(tc.prefix)
		if got != tc.want || ok != tc.ok {
			t.Errorf("successor(%+q) = %+q, %v; want %+q, %v", tc.prefix, got, ok, tc.want, tc.ok)
		}
		if ok && !less16(tc.prefix, got) {
			t.Errorf("successor(%+q) = %+q is not greater in UTF-16 order", tc.prefix, got)
		}
	}
}

func less16(a, b string) bool {
	x, y := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return len(x) < len(y)
}
