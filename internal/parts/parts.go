// Package parts is the layout of a large value stored across several
// Azure Table properties, shared by tablestore's EntityCodec (a field
// tagged `table:"split"`) and the docstore driver, so that each reads what
// the other writes: property F holds the number of parts k (an Edm.Int32)
// and F‿1 … F‿k hold the pieces in order (strings, or Edm.Binary for
// bytes).
package parts

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// PropertySize is the largest string (as UTF-16) or binary property
	// (tablestore.MaxPropertySize).
	PropertySize = 64 << 10
	// EntitySize is Azure's limit for a whole entity
	// (tablestore.MaxEntitySize).
	EntitySize = 1 << 20
	// Sep joins a split field's name and a part's number: U+203F UNDERTIE,
	// a connector that Azure's property names (C# identifiers) may hold
	// but that no Go identifier and no json tag name can (a tag name
	// holding it is ignored by encoding/json), so a part's name never
	// collides with a field's.
	Sep = "‿"
	// Units is the most UTF-16 code units a string part holds: one less
	// than half a property's 64 KiB, which Azurite refuses for a string of
	// non-ASCII characters.
	Units = PropertySize/2 - 1
	// Max is the most parts a split value can need: every part but the
	// last fills a property (at least PropertySize-2 bytes), and an entity
	// holds EntitySize.
	Max = EntitySize / (PropertySize - 2)
)

// Name is the name of part i (from 1) of field name.
func Name(name string, i int) string { return name + Sep + strconv.Itoa(i) }

// Of parses a part's name into its field's name and number (1 to Max);
// ok is false for any other name.
func Of(name []byte) (field []byte, i int, ok bool) {
	at := strings.LastIndex(string(name), Sep)
	if at <= 0 {
		return nil, 0, false
	}
	digits := name[at+len(Sep):]
	if len(digits) == 0 || len(digits) > 2 || digits[0] == '0' {
		return nil, 0, false
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return nil, 0, false
		}
		i = 10*i + int(d-'0')
	}
	return name[:at], i, i <= Max
}

// CutUnits is the length in bytes of the longest prefix of s (valid
// UTF-8) holding at most max UTF-16 code units that ends between two
// characters: a character outside the BMP (a surrogate pair) is never cut
// in two.
func CutUnits(s string, max int) int {
	units := 0
	for i := 0; i < len(s); {
		c := s[i]
		n, u := 1, 1
		if c >= utf8.RuneSelf {
			_, n = utf8.DecodeRuneInString(s[i:])
			if n == 4 {
				u = 2
			}
		}
		if units+u > max {
			return i
		}
		units += u
		i += n
	}
	return len(s)
}

// UnitsOf is the length of s (valid UTF-8) in UTF-16 code units.
func UnitsOf(s string) int {
	units := 0
	for _, r := range s {
		units++
		if r > 0xFFFF {
			units++
		}
	}
	return units
}
