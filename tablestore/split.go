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

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/parts"
)

// The layout's names and sizes are package parts' (internal/parts), which
// the docstore driver shares.
const (
	partUnits = parts.Units
	maxParts  = parts.Max
)

// splittable reports whether a field of kind k may be split.
func splittable(k edmKind) bool { return k == edmString || k == edmBinary || k == edmJSON }

func partName(name string, i int) string { return parts.Name(name, i) }

func partOf(name []byte) (field []byte, i int, ok bool) { return parts.Of(name) }

// tooLarge is the error for field f's value of size bytes, which one
// property cannot hold.
func tooLarge(f *fieldPlan, size int, what string) error {
	return fmt.Errorf("%w: tablestore: field %s is %d bytes%s, a property holds %d (tag it `table:\"split\"` to store it across properties)", driver.ErrTooLarge, f.name, size, what, MaxPropertySize)
}

func cutUnits(s string, max int) int { return parts.CutUnits(s, max) }

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
