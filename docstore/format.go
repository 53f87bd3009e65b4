package docstore

// This file is how documents are stored: on tables as typed entity
// properties (tablestore.EntityCodec's layout), elsewhere as JSON objects
// (etagstore.JSON's layout), so that a Store[T] of a matching struct reads
// and writes them.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/parts"
	"github.com/etagstore/etagstore/tablestore"
)

// format turns a document's value tree into a backend's bytes and back.
type format interface {
	marshal(doc map[string]any) ([]byte, error)
	unmarshal(data []byte) (map[string]any, error)
	name() string
}

// annotation is the suffix of a member that gives another member's type,
// as in Azure Table's JSON ("Name@odata.type": "Edm.Binary").
const annotation = "@odata.type"

// JSONProperty is the table property listing, comma-separated, the
// properties a docstore write stored as a string holding JSON (nil, lists
// and maps, and fields held by pointer), so that reading without a struct
// gives them back as values. A tablestore.Store[T] keeps it (it is a member
// T does not know).
const JSONProperty = "docstoreJSON"

// DoubleProperty is the table property listing, comma-separated, the
// properties a docstore write stored as an Edm.Double whose value is a
// whole number (or not finite). The Table service answers an Edm.Double
// without its type, and a whole one as an integer ("2" for 2.0), which
// reads as an Edm.Int32 would: the list makes it read back as a float64,
// as it was written.
const DoubleProperty = "docstoreDouble"

////////////////////////////////////////////////////////////////
// JSON documents (memstore, blobs).

// jsonFormat stores a document as one JSON object. Numbers keep their kind
// (a float is written with a point or exponent), and a member holding
// bytes or a time has an annotation beside it ("m@odata.type":
// "Edm.Binary" or "Edm.DateTime") so that it reads back as bytes or a
// time without a struct; inside lists bytes and times read back as
// strings.
type jsonFormat struct{}

func (jsonFormat) name() string { return "json" }

func (jsonFormat) marshal(doc map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		return writeJSONString(buf, x)
	case rawString:
		return writeJSONString(buf, string(x))
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return invalidf("JSON cannot hold %v", x)
		}
		buf.WriteString(floatText(x))
	case []byte:
		return writeJSONString(buf, base64.StdEncoding.EncodeToString(x))
	case time.Time:
		return writeJSONString(buf, x.Format(time.RFC3339Nano))
	case jsonHeld:
		return writeJSON(buf, x.v)
	case []any:
		return writeJSONList(buf, x)
	case map[string]any:
		return writeJSONObject(buf, x)
	default:
		return invalidf("cannot store a %T", v)
	}
	return nil
}

// floatText is f with a point or an exponent, so that it reads back as a
// float.
func floatText(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func writeJSONString(buf *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return invalidf("string %q is not valid UTF-8", s)
	}
	b, _ := json.Marshal(s)
	buf.Write(b)
	return nil
}

func writeJSONList(buf *bytes.Buffer, l []any) error {
	buf.WriteByte('[')
	for i, e := range l {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeJSON(buf, e); err != nil {
			return err
		}
	}
	buf.WriteByte(']')
	return nil
}

func writeJSONObject(buf *bytes.Buffer, m map[string]any) error {
	buf.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if strings.HasSuffix(k, annotation) {
			return invalidf("member name %q ends in %q, which marks a type annotation", k, annotation)
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeMember(buf, k, m[k]); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

func writeMember(buf *bytes.Buffer, k string, v any) error {
	if err := writeJSONString(buf, k); err != nil {
		return err
	}
	buf.WriteByte(':')
	if err := writeJSON(buf, v); err != nil {
		return err
	}
	var edm string
	switch v.(type) {
	case []byte:
		edm = "Edm.Binary"
	case time.Time:
		edm = "Edm.DateTime"
	default:
		return nil
	}
	buf.WriteByte(',')
	_ = writeJSONString(buf, k+annotation)
	buf.WriteByte(':')
	return writeJSONString(buf, edm)
}

func (jsonFormat) unmarshal(data []byte) (map[string]any, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalidf("stored document is not a JSON object")
	}
	return m, nil
}

// parseJSON parses JSON text into a value tree, applying annotations.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalidf("stored document is not JSON: %v", err)
	}
	return fromJSON(v)
}

func fromJSON(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return number(string(x))
	case []any:
		for i := range x {
			e, err := fromJSON(x[i])
			if err != nil {
				return nil, err
			}
			x[i] = e
		}
	case map[string]any:
		return objectFromJSON(x)
	}
	return v, nil
}

// number is a JSON number: an int64 when it has no point or exponent and
// fits, otherwise a float64.
func number(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, invalidf("bad number %s", s)
	}
	return f, nil
}

func objectFromJSON(m map[string]any) (any, error) {
	for k, v := range m {
		if strings.HasSuffix(k, annotation) {
			continue
		}
		e, err := fromJSON(v)
		if err != nil {
			return nil, err
		}
		edm, _ := m[k+annotation].(string)
		if m[k], err = annotated(e, edm); err != nil {
			return nil, err
		}
	}
	for k := range m {
		if strings.HasSuffix(k, annotation) {
			delete(m, k)
		}
	}
	return m, nil
}

// annotated is v read as a value of the annotation's type.
func annotated(v any, edm string) (any, error) {
	s, ok := v.(string)
	if !ok || edm == "" {
		return v, nil
	}
	switch edm {
	case "Edm.Binary":
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, invalidf("bad Edm.Binary value: %v", err)
		}
		return b, nil
	case "Edm.DateTime":
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, invalidf("bad Edm.DateTime value: %v", err)
		}
		return t, nil
	}
	return v, nil
}

////////////////////////////////////////////////////////////////
// Table entities.

// tableFormat stores a document's members as typed entity properties, as
// tablestore.EntityCodec stores a struct's fields: strings as Edm.String,
// booleans, integers as Edm.Int64, floats as Edm.Double, times as
// Edm.DateTime (to 100 ns; the zero time as no property), bytes as
// Edm.Binary, and everything else (nil, lists, maps, members held by
// pointer) as an Edm.String holding its JSON, named in JSONProperty.
type tableFormat struct{}

func (tableFormat) name() string { return "table" }

var (
	identifier    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)
	reservedNames = map[string]bool{"PartitionKey": true, "RowKey": true, "Timestamp": true, tablestore.MetaProperty: true, JSONProperty: true, DoubleProperty: true}
	minDateTime   = time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)
)

func (tableFormat) marshal(doc map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	var size entitySize
	buf.WriteByte('{')
	var held, doubles []string
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if reservedNames[k] || !identifier.MatchString(k) || strings.HasPrefix(strings.ToLower(k), "odata.") {
			return nil, invalidf("%q cannot name a table property (letters, digits and _, not a reserved name)", k)
		}
		isHeld, err := writeProperty(&buf, k, doc[k], &size)
		if err != nil {
			return nil, err
		}
		if isHeld {
			held = append(held, k)
		}
		if f, ok := doc[k].(float64); ok && (f == math.Trunc(f) || math.IsNaN(f)) {
			doubles = append(doubles, k) // whole, or not finite
		}
	}
	if err := size.check(); err != nil {
		return nil, err // before anything is sent
	}
	for _, list := range []struct {
		name  string
		names []string
	}{{JSONProperty, held}, {DoubleProperty, doubles}} {
		if len(list.names) > 0 {
			comma(&buf)
			_ = writeJSONString(&buf, list.name)
			buf.WriteByte(':')
			_ = writeJSONString(&buf, strings.Join(list.names, ","))
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func comma(buf *bytes.Buffer) {
	if buf.Len() > 1 {
		buf.WriteByte(',')
	}
}

// writeProperty writes property k holding v, and reports whether it holds
// JSON.
func writeProperty(buf *bytes.Buffer, k string, v any, size *entitySize) (bool, error) {
	var text []byte
	var edm string
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return false, invalidf("property %s is not valid UTF-8", k)
		}
		if writeText(buf, k, x, size) {
			return false, nil
		}
		text, _ = json.Marshal(x)
	case rawString:
		if writeText(buf, k, string(x), size) {
			return false, nil
		}
		text, _ = json.Marshal(string(x))
	case bool:
		size.add(k, 1, 1)
		text = strconv.AppendBool(nil, x)
	case int64:
		size.add(k, 1, 8)
		text, edm = strconv.AppendQuote(nil, strconv.FormatInt(x, 10)), "Edm.Int64"
	case float64:
		size.add(k, 1, 8)
		text, edm = doubleText(x), "Edm.Double"
	case time.Time:
		if x.IsZero() {
			return false, nil
		}
		x = x.UTC()
		if x.Before(minDateTime) || x.Year() > 9999 {
			return false, invalidf("property %s: %s is outside Edm.DateTime (1601 to 9999)", k, x)
		}
		size.add(k, 1, 8)
		text, edm = strconv.AppendQuote(nil, x.Format("2006-01-02T15:04:05.0000000Z")), "Edm.DateTime"
	case []byte:
		if splitBinary(buf, k, x, size) {
			return false, nil
		}
		text, edm = strconv.AppendQuote(nil, base64.StdEncoding.EncodeToString(x)), "Edm.Binary"
	default:
		var j bytes.Buffer
		if err := writeJSON(&j, v); err != nil {
			return false, err
		}
		if !writeText(buf, k, j.String(), size) {
			comma(buf)
			_ = writeJSONString(buf, k)
			buf.WriteByte(':')
			_ = writeJSONString(buf, j.String())
		}
		return true, nil
	}
	comma(buf)
	_ = writeJSONString(buf, k)
	buf.WriteByte(':')
	buf.Write(text)
	if edm != "" {
		buf.WriteByte(',')
		_ = writeJSONString(buf, k+annotation)
		buf.WriteByte(':')
		_ = writeJSONString(buf, edm)
	}
	return false, nil
}

// Limits of a table entity, as docstore fills one: what the bookkeeping
// (tablestore.MetaProperty, JSONProperty, DoubleProperty) and the keys
// leave of Azure's 252 properties and 1 MiB.
const (
	maxDocProperties = tablestore.MaxProperties - 2
	maxDocBytes      = tablestore.MaxEntitySize - 8<<10
)

// entitySize adds up what a document takes as a table entity, by Azure's
// reckoning (4 bytes and the name's UTF-16 per property, and the value's
// size; a value stored in parts counts each part), so that one no entity
// can hold is refused before anything is sent, naming its largest member.
type entitySize struct {
	props, bytes int
	largest      string
	largestBytes int
}

// add counts member k, taking props properties and bytes of values.
func (z *entitySize) add(k string, props, bytes int) {
	bytes += props * (4 + 2*len(k) + 4) // each property's name ("k‿i": a few more units)
	z.props, z.bytes = z.props+props, z.bytes+bytes
	if bytes > z.largestBytes {
		z.largest, z.largestBytes = k, bytes
	}
}

// check refuses more properties than an entity has, or more than 1 MiB:
// both match etagstore.ErrTooLarge (gcerrors.ResourceExhausted).
func (z *entitySize) check() error {
	switch {
	case z.props > maxDocProperties:
		return fmt.Errorf("%w: docstore: the document needs %d table properties (values past 64 KiB take one per part), an entity holds %d", etagstore.ErrTooLarge, z.props, maxDocProperties)
	case z.bytes > maxDocBytes:
		return fmt.Errorf("%w: docstore: the document is %d bytes as a table entity, more than %d; its largest member is %s (%d bytes)", etagstore.ErrTooLarge, z.bytes, maxDocBytes, z.largest, z.largestBytes)
	}
	return nil
}

// writeText counts s, the text of member k, and writes it as parts (see
// splitText) when one property cannot hold it; it reports whether it did.
func writeText(buf *bytes.Buffer, k, s string, size *entitySize) bool {
	units := parts.UnitsOf(s)
	if 2*units <= parts.PropertySize {
		size.add(k, 1, 2*units)
		return false
	}
	size.add(k, splitText(buf, k, s)+1, 2*units+4)
	return true
}

// splitText writes s, too large for one property, as the parts of
// property k, as tablestore's EntityCodec writes a field tagged
// `table:"split"` (see package parts): k holds the number of parts,
// k‿1 … k‿n the pieces. It returns n.
func splitText(buf *bytes.Buffer, k, s string) int {
	n := 0
	for len(s) > 0 {
		cut := parts.CutUnits(s, parts.Units)
		n++
		comma(buf)
		_ = writeJSONString(buf, parts.Name(k, n))
		buf.WriteByte(':')
		_ = writeJSONString(buf, s[:cut])
		s = s[cut:]
	}
	writeCount(buf, k, n)
	return n
}

// splitBinary counts b, the bytes of member k, and, as splitText does,
// writes them as parts of parts.PropertySize bytes, each an Edm.Binary,
// when one property cannot hold them; it reports whether it did.
func splitBinary(buf *bytes.Buffer, k string, b []byte, size *entitySize) bool {
	if len(b) <= parts.PropertySize {
		size.add(k, 1, len(b))
		return false
	}
	size.add(k, (len(b)+parts.PropertySize-1)/parts.PropertySize+1, len(b)+4)
	n := 0
	for len(b) > 0 {
		cut := min(len(b), parts.PropertySize)
		n++
		name := parts.Name(k, n)
		comma(buf)
		_ = writeJSONString(buf, name)
		buf.WriteByte(':')
		buf.Write(strconv.AppendQuote(nil, base64.StdEncoding.EncodeToString(b[:cut])))
		buf.WriteByte(',')
		_ = writeJSONString(buf, name+annotation)
		buf.WriteString(`:"Edm.Binary"`)
		b = b[cut:]
	}
	writeCount(buf, k, n)
	return true
}

// writeCount writes property k holding n, the number of its parts (an
// Edm.Int32, as the service takes a JSON integer).
func writeCount(buf *bytes.Buffer, k string, n int) {
	comma(buf)
	_ = writeJSONString(buf, k)
	buf.WriteByte(':')
	buf.WriteString(strconv.Itoa(n))
}

// joinSplit replaces the parts of every value in doc that was stored
// across properties (by splitText, or by a tablestore.Store[T]'s field
// tagged `table:"split"`) with the value: bytes from Edm.Binary parts,
// otherwise the text, parsed as JSON when held names the property.
func joinSplit(doc map[string]any, held map[string]bool) error {
	split := map[string]bool{}
	for k := range doc {
		if f, _, ok := parts.Of([]byte(k)); ok {
			split[string(f)] = true
		}
	}
	for f := range split {
		n, ok := doc[f].(int64)
		if !ok || n < 1 || n > parts.Max {
			return invalidf("property %s: parts %s1… are stored, but %s does not hold their number", f, f+parts.Sep, f)
		}
		var text strings.Builder
		var bin []byte
		binary := false
		for i := 1; i <= int(n); i++ {
			name := parts.Name(f, i)
			switch x := doc[name].(type) {
			case []byte:
				bin, binary = append(bin, x...), true
			case rawString:
				text.WriteString(string(x))
			case string:
				text.WriteString(x)
			case nil:
				return invalidf("property %s: split into %d parts, part %s is missing", f, n, name)
			default:
				return invalidf("property %s: part %s holds a %T", f, name, x)
			}
			delete(doc, name)
		}
		switch {
		case binary:
			doc[f] = bin
		case held[f]:
			v, err := parseJSON([]byte(text.String()))
			if err != nil {
				return invalidf("property %s: %v", f, err)
			}
			doc[f] = v
		default:
			doc[f] = rawString(text.String())
		}
	}
	return nil
}

func doubleText(f float64) []byte {
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`)
	case math.IsInf(f, 1):
		return []byte(`"Infinity"`)
	case math.IsInf(f, -1):
		return []byte(`"-Infinity"`)
	}
	return []byte(floatText(f))
}

func (tableFormat) unmarshal(data []byte) (map[string]any, error) {
	var props map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&props); err != nil {
		return nil, invalidf("stored entity is not a JSON object: %v", err)
	}
	held, doubles := listed(props[JSONProperty]), listed(props[DoubleProperty])
	doc := make(map[string]any, len(props))
	for k, raw := range props {
		if strings.HasSuffix(k, annotation) || k == JSONProperty || k == DoubleProperty {
			continue
		}
		var edm string
		_ = json.Unmarshal(props[k+annotation], &edm)
		if doubles[k] && edm == "" {
			edm = "Edm.Double" // as written: the service leaves it out
		}
		v, err := readProperty(raw, edm, held[k])
		if err != nil {
			return nil, invalidf("property %s: %v", k, err)
		}
		doc[k] = v
	}
	if err := joinSplit(doc, held); err != nil {
		return nil, err
	}
	return doc, nil
}

// listed is the set of names a list property (JSONProperty,
// DoubleProperty) holds.
func listed(raw json.RawMessage) map[string]bool {
	var s string
	_ = json.Unmarshal(raw, &s)
	set := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		set[n] = true
	}
	return set
}

// readProperty is one property's value, of type edm ("" when the JSON
// type says it); held marks a string holding JSON.
func readProperty(raw json.RawMessage, edm string, held bool) (any, error) {
	if len(raw) == 0 || raw[0] != '"' {
		if edm == "Edm.Double" {
			return strconv.ParseFloat(string(raw), 64)
		}
		v, err := parseJSON(raw)
		return v, err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	switch edm {
	case "Edm.Int64":
		return strconv.ParseInt(s, 10, 64)
	case "Edm.Double":
		return parseDouble(s)
	case "Edm.DateTime":
		t, err := time.Parse(time.RFC3339Nano, s)
		return t.UTC(), err
	case "Edm.Binary":
		return base64.StdEncoding.DecodeString(s)
	case "Edm.Guid", "Edm.String":
		return s, nil
	}
	if held {
		return parseJSON([]byte(s))
	}
	return rawString(s), nil
}

func parseDouble(s string) (float64, error) {
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "Infinity", "INF":
		return math.Inf(1), nil
	case "-Infinity", "-INF":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
}
