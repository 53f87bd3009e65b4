package tablestore

// Large fields: a field tagged `table:"split"` whose value is larger than
// one property (MaxPropertySize: a string or JSON text as UTF-16, a
// []byte) is stored across several properties. See EntityCodec for the
// layout and its names.

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/etagstore/etagstore/driver"
)

// partSep joins a split field's name and a part's number: U+203F
// UNDERTIE, a connector that Azure's property names (C# identifiers) may
// hold but that no Go identifier and no json tag name can (a tag name
// holding it is ignored by encoding/json), so a part's name never collides
// with a field's.
const partSep = "‿"

// partUnits is the most UTF-16 code units a string part holds: one less
// than a property's 64 KiB, which Azurite refuses for a string of
// non-ASCII characters.
const partUnits = MaxPropertySize/2 - 1

// maxParts is the most parts a split value can need: every part but the
// last fills a property (at least MaxPropertySize-2 bytes), and an entity
// holds MaxEntitySize.
const maxParts = MaxEntitySize / (MaxPropertySize - 2)

// splittable reports whether a field of kind k may be split.
func splittable(k edmKind) bool { return k == edmString || k == edmBinary || k == edmJSON }

// partName is the name of part i (from 1) of field name.
func partName(name string, i int) string { return name + partSep + strconv.Itoa(i) }

// partOf parses a part's name into its field's name and number (1 to
// maxParts); ok is false for any other name.
func partOf(name []byte) (field []byte, i int, ok bool) {
	at := strings.LastIndex(string(name), partSep)
	if at <= 0 {
		return nil, 0, false
	}
	digits := name[at+len(partSep):]
	if len(digits) == 0 || len(digits) > 2 || digits[0] == '0' {
		return nil, 0, false
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return nil, 0, false
		}
		i = 10*i + int(d-'0')
	}
	return name[:at], i, i <= maxParts
}

// tooLarge is the error for field f's value of size bytes, which one
// property cannot hold.
func tooLarge(f *fieldPlan, size int, what string) error {
	return fmt.Errorf("%w: tablestore: field %s is %d bytes%s, a property holds %d (tag it `table:\"split\"` to store it across properties)", driver.ErrTooLarge, f.name, size, what, MaxPropertySize)
}

// cutUnits is the length in bytes of the longest prefix of s (valid UTF-8)
// holding at most max UTF-16 code units that ends between two characters:
// a character outside the BMP (a surrogate pair) is never cut in two.
func cutUnits(s string, max int) int {
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

// splitText writes s, too large for one property, as the parts of field f:
// properties f‿1 … f‿k holding its pieces in order, and f holding k (an
// Edm.Int32).
func (w *entityWriter) splitText(f *fieldPlan, s string) {
	k := 0
	for len(s) > 0 {
		n := cutUnits(s, partUnits)
		k++
		w.name(partName(f.name, k), 4)
		var units int
		w.buf, units = appendString(w.buf, s[:n])
		w.size += 2 * units
		s = s[n:]
	}
	w.name(f.name, 4)
	w.buf = strconv.AppendInt(w.buf, int64(k), 10)
}

// splitBinary is splitText for a []byte: parts of MaxPropertySize bytes,
// each an Edm.Binary.
func (w *entityWriter) splitBinary(f *fieldPlan, b []byte) {
	k := 0
	for len(b) > 0 {
		n := min(len(b), MaxPropertySize)
		k++
		name := partName(f.name, k)
		w.name(name, 4+n)
		w.buf = append(base64.StdEncoding.AppendEncode(append(w.buf, '"'), b[:n]), '"')
		w.annotate(name, "Edm.Binary")
		b = b[n:]
	}
	w.name(f.name, 4)
	w.buf = strconv.AppendInt(w.buf, int64(k), 10)
}

// joinParts sets fv, field f, to the value split into the k parts parts[1:k+1].
func joinParts(fv reflect.Value, f *fieldPlan, k string, parts [][]byte) error {
	n, err := strconv.Atoi(k)
	if err != nil || n < 1 || n > maxParts {
		return fmt.Errorf("%q is not a number of parts (1 to %d)", k, maxParts)
	}
	var text strings.Builder
	var bin []byte
	for i := 1; i <= n; i++ {
		if i >= len(parts) || parts[i] == nil {
			return fmt.Errorf("split into %d parts, part %s is missing", n, partName(f.name, i))
		}
		t, err := unquote(parts[i])
		if err != nil {
			return fmt.Errorf("part %s: %w", partName(f.name, i), err)
		}
		if f.kind != edmBinary {
			text.WriteString(t.text)
			continue
		}
		if bin, err = base64.StdEncoding.AppendDecode(bin, []byte(t.text)); err != nil {
			return fmt.Errorf("part %s: %w", partName(f.name, i), err)
		}
	}
	switch f.kind {
	case edmBinary:
		fv.SetBytes(bin)
	case edmString:
		fv.SetString(text.String())
	default:
		return decodeScalar(fv, edmJSON, text.String())
	}
	return nil
}
