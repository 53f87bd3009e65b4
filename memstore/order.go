package memstore

import "cmp"

// compareKeys orders keys as driver.CompareKeys does (by UTF-16 code
// units) for every valid UTF-8 key, which are the only keys a Store
// writes, without decoding runes: it compares the first byte in which the
// keys differ, after swapping the two groups of UTF-8 lead bytes whose
// order UTF-16 reverses. A character above U+FFFF (lead byte F0–F4, a
// surrogate pair in UTF-16) sorts before U+E000–U+FFFF (lead byte EE or
// EF); every other pair of characters orders as its UTF-8 bytes do, and a
// difference inside a character (a continuation byte) is between two
// characters of the same lead byte, which order as their bytes.
//
// It is a total order on all byte strings, valid UTF-8 or not, so the
// B-tree stays sound whatever keys a caller of the Backend writes, and
// the keys that start with any prefix are contiguous in it, beginning at
// the prefix itself.
func compareKeys(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	return cmp.Compare(byteRank[a[i]], byteRank[b[i]])
}

// lessKey is compareKeys as the B-tree's less function.
func lessKey(a, b string) bool { return compareKeys(a, b) < 0 }

// byteRank is the position of each byte in compareKeys' order: the
// identity, except that the lead bytes F0–F4 come right after ED and EE,
// EF after them.
var byteRank = func() (r [256]byte) {
	for i := range r {
		r[i] = byte(i)
	}
	for i := byte(0xF0); i <= 0xF4; i++ {
		r[i] = i - 2 // F0–F4 → EE–F2
	}
	r[0xEE], r[0xEF] = 0xF3, 0xF4
	return r
}()
