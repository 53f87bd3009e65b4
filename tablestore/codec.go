package tablestore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/fields"
	"github.com/etagstore/etagstore/internal/parts"
)

// Azure Table limits (Understanding the Table service data model).
const (
	// MaxProperties is the number of properties a document of yours may
	// have: Azure allows 252 custom properties and etagstore keeps its
	// bookkeeping (recent write ids) in one of them.
	MaxProperties = 251
	// MaxPropertySize is the largest string (as UTF-16) or binary property.
	MaxPropertySize = parts.PropertySize
	// MaxEntitySize is Azure's limit for a whole entity.
	MaxEntitySize = parts.EntitySize
	// reserveForKeys is kept free of MaxEntitySize for the PartitionKey and
	// RowKey (at most 1 KiB each) and the bookkeeping property.
	reserveForKeys = 4 + 2*maxKeyBytes + 8 + 2*len(MetaProperty) + 4 + 2*driver.MaxMetaLen
)

// MetaProperty is the entity property in which etagstore keeps the ids of
// the last few writes. It is not part of your document.
const MetaProperty = "etagstoreMeta"

// EntityCodec maps a struct to Azure Table entity properties, the default
// Codec of a table Backend. Exported fields become properties named like
// encoding/json names them (a `json:"name"` tag renames, `json:"-"` skips;
// the fields of an exported struct embedded by value are properties too,
// an embedded pointer is one property), with these EDM types:
//
//	string                          Edm.String
//	string tagged `table:"guid"`    Edm.Guid
//	bool                            Edm.Boolean
//	int8, int16, int32, uint8, uint16   Edm.Int32
//	int, int64, uint, uint32, uint64    Edm.Int64 (uint64 above MaxInt64 is kept as its two's complement)
//	float32, float64                Edm.Double (NaN and ±Inf included)
//	time.Time                       Edm.DateTime, in UTC to 100 ns; the zero time is stored as no property
//	[]byte                          Edm.Binary
//	anything else (structs, slices, maps, pointers, interfaces)
//	                                Edm.String holding the value's JSON
//
// A document is a struct or a pointer to one (NewStore[*Doc] works too);
// other types are refused with etagstore.ErrInvalidInput, before anything
// is sent. A nil pointer document is refused the same way.
//
// Every round trip is exact within those rules (times come back in UTC,
// truncated to Azure's 100 ns resolution); a value that cannot come back
// exactly is refused before anything is sent with an error that matches
// etagstore.ErrInvalidInput and names the field (an
// *etagstore.InvalidValueError): a string that is not valid UTF-8, a time
// outside 1601–9999 (the range of Edm.DateTime), and in fields held as JSON
// whatever etagstore.JSON refuses (invalid UTF-8, NaN, ±Inf). Azure's limits are checked
// before anything is sent and name the field: at most MaxProperties fields,
// MaxPropertySize per string (measured as UTF-16) or binary value, and
// MaxEntitySize for the whole entity (errors match etagstore.ErrTooLarge).
//
// A string, []byte or JSON-held field tagged `table:"split"` may be larger
// than one property: a value one property cannot hold (more than 32,767
// UTF-16 code units of text, or MaxPropertySize bytes) is stored as
// properties Name‿1 … Name‿k holding its pieces in order (whole
// characters: a surrogate pair or UTF-8 sequence is never cut), and Name
// holding k as an Edm.Int32; a smaller value is one property, as without
// the tag. The separator is U+203F UNDERTIE, which Azure's property names
// (C# identifiers) allow but no Go identifier or json tag name can hold,
// so a part's name never collides with a field's. The entity's limits
// still hold (MaxEntitySize, MaxProperties, the parts counted): past them
// the write is refused before sending with etagstore.ErrTooLarge naming
// the field. A filter on a split field is refused (etagstore.ErrInvalidInput):
// the service cannot compare a value held in parts. A merge writes a split
// field's count and every part; parts of an earlier, longer value stay in
// the entity, unread, until a write replaces it. An untagged field is
// held to one property and refused past it. Names
// Azure reserves (PartitionKey, RowKey, Timestamp, odata.*) and MetaProperty
// are refused with etagstore.ErrInvalidInput, as are names that are not
// identifiers.
//
// EntityCodec is safe for concurrent use.
type EntityCodec struct{}

var _ etagstore.Codec = EntityCodec{}

type edmKind uint8

const (
	edmString edmKind = iota
	edmGUID
	edmBool
	edmInt32
	edmInt64
	edmDouble
	edmDateTime
	edmBinary
	edmJSON
)

type fieldPlan struct {
	index []int
	name  string
	kind  edmKind
	split bool // tagged table:"split": stored across properties when large
	// omit: tagged json:",omitempty" (omitEmpty) or ",omitzero": an empty
	// (or zero) value is no property, as encoding/json writes no member.
	omit, omitZero bool
}

// omitted reports whether fv, the value of f, is written as no property
// (omitempty: false, 0, "", a nil pointer or interface, an empty slice,
// map or array; omitzero: the zero value, or IsZero() true), as
// encoding/json leaves such a field out.
func (f *fieldPlan) omitted(fv reflect.Value) bool {
	if f.omitZero {
		if z, ok := interfaceOf(fv).(interface{ IsZero() bool }); ok && (fv.Kind() != reflect.Pointer || !fv.IsNil()) {
			if z.IsZero() {
				return true
			}
		} else if fv.IsZero() {
			return true
		}
	}
	if !f.omit {
		return false
	}
	switch fv.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return fv.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return fv.IsZero()
	}
	return false
}

// interfaceOf is fv's value, or nil when it cannot be had.
func interfaceOf(fv reflect.Value) any {
	if !fv.CanInterface() {
		return nil
	}
	return fv.Interface()
}

type typePlan struct {
	fields []fieldPlan    // in the struct's order
	byName map[string]int // the index in fields of each property name
	// order is the order in which properties are written: by name, as the
	// SDK hands entities back (it sorts them), so that an entity read is
	// usually byte for byte what Marshal writes for its value (see Decode).
	order    []int
	err      error
	sizeHint atomic.Int64 // the size of the last encoding
}

var plans sync.Map // reflect.Type -> *typePlan

var (
	timeType      = reflect.TypeFor[time.Time]()
	identifier    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)
	minDateTime   = time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)
	maxYear       = 9999 // Edm.DateTime ends at 9999-12-31T23:59:59.9999999Z
	guidPattern   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	reservedNames = map[string]bool{"PartitionKey": true, "RowKey": true, "Timestamp": true, MetaProperty: true}
)

func planFor(t reflect.Type) (*typePlan, error) {
	if p, ok := plans.Load(t); ok {
		return p.(*typePlan), p.(*typePlan).err
	}
	p := &typePlan{}
	p.fields, p.err = buildPlan(t)
	p.byName = make(map[string]int, len(p.fields))
	p.order = make([]int, len(p.fields))
	for i, f := range p.fields {
		p.byName[f.name] = i
		p.order[i] = i
	}
	slices.SortFunc(p.order, func(i, j int) int { return strings.Compare(p.fields[i].name, p.fields[j].name) })
	plans.Store(t, p)
	return p, p.err
}

func buildPlan(t reflect.Type) ([]fieldPlan, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: tablestore: a table document must be a struct, not %s", etagstore.ErrInvalidInput, t)
	}
	st := fields.Walk(t, promoteByValue)
	for _, c := range st.Clashes {
		// Two fields of one Go name at one depth hide each other in Go
		// itself, and json stores neither; two names mapping to one
		// property are refused.
		if c.A.GoName != c.B.GoName {
			return nil, fmt.Errorf("%w: tablestore: fields %s and %s of %s both map to property %q", etagstore.ErrInvalidInput, c.A.GoName, c.B.GoName, t, c.Name)
		}
	}
	var plan []fieldPlan
	for _, f := range st.Fields {
		if !f.Exported {
			continue // an unexported embedded struct named by a json tag: not settable
		}
		fp, err := planField(t, f)
		if err != nil {
			return nil, err
		}
		plan = append(plan, fp)
	}
	if len(plan) > MaxProperties {
		return nil, fmt.Errorf("%w: tablestore: %s has %d fields, a table entity can hold %d", etagstore.ErrTooLarge, t, len(plan), MaxProperties)
	}
	return plan, nil
}

// promoteByValue is the table's rule for embedded structs: the fields of
// an exported embedded struct held by value are properties of the entity
// (whatever its json tag says); an embedded pointer is one property
// holding its JSON, like any other pointer, and an unexported embedded
// struct is not stored.
func promoteByValue(sf reflect.StructField, _ bool) bool {
	return sf.IsExported() && sf.Type.Kind() == reflect.Struct
}

// planField checks the property name and table options of field f of t.
func planField(t reflect.Type, f fields.Field) (fieldPlan, error) {
	name := f.Name
	if reservedNames[name] || strings.HasPrefix(strings.ToLower(name), "odata.") {
		return fieldPlan{}, fmt.Errorf("%w: tablestore: field %s of %s uses the reserved property name %q", etagstore.ErrInvalidInput, f.GoName, t, name)
	}
	if !identifier.MatchString(name) {
		return fieldPlan{}, fmt.Errorf("%w: tablestore: field %s of %s: %q is not a valid property name (letters, digits and _, at most 255)", etagstore.ErrInvalidInput, f.GoName, t, name)
	}
	fp := fieldPlan{index: f.Index, name: name, kind: kindOf(f.Type), omit: f.OmitEmpty, omitZero: f.OmitZero}
	switch tag := f.Tag.Get("table"); tag {
	case "":
	case "guid":
		if f.Type.Kind() != reflect.String {
			return fieldPlan{}, fmt.Errorf("%w: tablestore: field %s of %s: the guid option needs a string field", etagstore.ErrInvalidInput, f.GoName, t)
		}
		fp.kind = edmGUID
	case "split":
		if !splittable(fp.kind) {
			return fieldPlan{}, fmt.Errorf("%w: tablestore: field %s of %s: the split option needs a string, a []byte or a field held as JSON", etagstore.ErrInvalidInput, f.GoName, t)
		}
		fp.split = true
	default:
		return fieldPlan{}, fmt.Errorf("%w: tablestore: field %s of %s: unknown table option %q (guid or split)", etagstore.ErrInvalidInput, f.GoName, t, tag)
	}
	return fp, nil
}

func kindOf(t reflect.Type) edmKind {
	if t == timeType {
		return edmDateTime
	}
	switch t.Kind() {
	case reflect.String:
		return edmString
	case reflect.Bool:
		return edmBool
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return edmInt32
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return edmInt64
	case reflect.Float32, reflect.Float64:
		return edmDouble
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return edmBinary
		}
	}
	return edmJSON
}

func structValue(v any) (reflect.Value, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return reflect.Value{}, fmt.Errorf("%w: tablestore: nil document (%s): a table entity cannot hold nil", etagstore.ErrInvalidInput, rv.Type())
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return reflect.Value{}, fmt.Errorf("%w: tablestore: nil document", etagstore.ErrInvalidInput)
	}
	return rv, nil
}

// CheckType refuses, with etagstore.ErrInvalidInput, a document type that
// the codec cannot decode into: anything but a struct or a pointer to one
// (an interface type such as any among them). A Store calls it before
// writing when its T is an interface type, whose values Marshal would
// otherwise accept by their dynamic type.
func (EntityCodec) CheckType(t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	_, err := planFor(t)
	return err
}

// Members returns the entity properties the codec stores for struct type t
// (or a pointer to one), with their type annotations ("Name@odata.type");
// nil for a type it cannot store. A Store keeps the other properties of an
// entity it writes over (see etagstore.Doc's Extra), each with its type.
func (EntityCodec) Members(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p, err := planFor(t)
	if err != nil {
		return nil
	}
	known := make(map[string]bool, 2*len(p.fields))
	for _, f := range p.fields {
		known[f.name], known[f.name+"@odata.type"] = true, true
		if f.split { // its parts: T's only for a field T splits; another program's F‿k are kept
			for i := 1; i <= maxParts; i++ {
				known[partName(f.name, i)], known[partName(f.name, i)+"@odata.type"] = true, true
			}
		}
	}
	return known
}

// invalid is the error for a field's value that cannot be stored exactly.
func invalid(field, format string, args ...any) error {
	return &etagstore.InvalidValueError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Marshal encodes the struct v (or pointer to one) as an entity-properties
// JSON object with odata type annotations. A field tagged
// json:",omitempty" (or ",omitzero") whose value is empty (zero) is no
// property, as encoding/json writes no member for it.
func (c EntityCodec) Marshal(v any) ([]byte, error) { return c.marshal(v, true) }

// marshal is Marshal; without omit it writes the fields tagged omitempty
// or omitzero even when empty (a merge that names one writes it).
func (EntityCodec) marshal(v any, omit bool) ([]byte, error) {
	rv, err := structValue(v)
	if err != nil {
		return nil, err
	}
	plan, err := planFor(rv.Type())
	if err != nil {
		return nil, err
	}
	w := plan.writer()
	for _, i := range plan.order {
		f := &plan.fields[i]
		fv := rv.FieldByIndex(f.index)
		if omit && f.omitted(fv) {
			continue
		}
		if err := w.field(f, fv); err != nil {
			return nil, err
		}
		w.check(f)
	}
	if w.over != "" {
		w.over = plan.crossing(rv)
	}
	return w.finish(plan)
}

// crossing is the field of rv, a document past Azure's limits, with which
// the entity passes them in the order of the struct's fields (the one an
// error names).
func (p *typePlan) crossing(rv reflect.Value) string {
	var w entityWriter
	for i := range p.fields {
		f := &p.fields[i]
		if f.omitted(rv.FieldByIndex(f.index)) {
			continue
		}
		_ = w.field(f, rv.FieldByIndex(f.index)) // Marshal found no error
		if w.check(f); w.over != "" {
			return w.over
		}
	}
	return ""
}

// entityWriter writes the properties of an entity and adds up its size as
// Azure counts it.
type entityWriter struct {
	buf    []byte
	size   int
	props  int
	over   string  // the field that took the entity past its limits
	pooled *[]byte // the scratch buffer buf came from, if it did
}

// writer returns an entityWriter with room for a document of p's type as
// large as the last one.
func (p *typePlan) writer() entityWriter {
	buf := make([]byte, 1, p.sizeHint.Load()+64)
	buf[0] = '{'
	return entityWriter{buf: buf}
}

// check notes f as the field that took the entity past Azure's limits
// (MaxEntitySize, MaxProperties), when it did.
func (w *entityWriter) check(f *fieldPlan) {
	if w.over == "" && (w.size > MaxEntitySize-reserveForKeys || w.props > MaxProperties) {
		w.over = f.name
	}
}

// finish closes the object, refuses an entity past Azure's limits and
// remembers its size as the next one's hint (the last size, not the
// largest: one large document must not make every later buffer large).
// A buffer much larger than the entity is given back as an exact copy, so
// that what the Store keeps (the version cache, memstore) holds no unused
// room.
func (w *entityWriter) finish(p *typePlan) ([]byte, error) {
	if w.over != "" {
		return nil, fmt.Errorf("%w: tablestore: with field %s the document is %d bytes in %d properties as an entity, the limits are %d bytes and %d properties", etagstore.ErrTooLarge, w.over, w.size, w.props, MaxEntitySize-reserveForKeys, MaxProperties)
	}
	w.buf = append(w.buf, '}')
	p.sizeHint.Store(int64(len(w.buf)))
	if cap(w.buf) > 2*len(w.buf)+64 {
		return bytes.Clone(w.buf), nil
	}
	return w.buf, nil
}

// name starts the property name (an identifier: nothing to escape), and
// counts the property's name and overhead; size is the value's size.
func (w *entityWriter) name(name string, size int) {
	if len(w.buf) > 1 {
		w.buf = append(w.buf, ',')
	}
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, '"', ':')
	w.size += 8 + 2*utf16Len(name) + size
	w.props++
}

// annotate writes the type annotation of property name.
func (w *entityWriter) annotate(name, edm string) {
	w.buf = append(w.buf, ',', '"')
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, `@odata.type":"`...)
	w.buf = append(w.buf, edm...)
	w.buf = append(w.buf, '"')
}

// field writes field f, whose value is fv, as a property, or as none (the
// zero time, a nil []byte, an empty GUID).
func (w *entityWriter) field(f *fieldPlan, fv reflect.Value) error {
	switch f.kind {
	case edmString:
		return w.text(f, fv.String())
	case edmGUID:
		return w.guid(f, fv.String())
	case edmBool:
		w.name(f.name, 1)
		w.buf = strconv.AppendBool(w.buf, fv.Bool())
	case edmInt32:
		w.name(f.name, 4)
		w.buf = strconv.AppendInt(w.buf, intOf(fv), 10)
	case edmInt64:
		w.name(f.name, 8)
		w.buf = append(w.buf, '"')
		w.buf = append(strconv.AppendInt(w.buf, intOf(fv), 10), '"')
		w.annotate(f.name, "Edm.Int64")
	case edmDouble:
		w.name(f.name, 8)
		w.buf = appendDouble(w.buf, fv.Float(), fv.Type().Bits())
		w.annotate(f.name, "Edm.Double")
	case edmDateTime:
		return w.dateTime(f, fv.Interface().(time.Time))
	case edmBinary:
		return w.binary(f, fv)
	default:
		return w.json(f, fv)
	}
	return nil
}

// intOf is the integer in fv; an unsigned one above MaxInt64 as its two's
// complement.
func intOf(fv reflect.Value) int64 {
	if fv.CanInt() {
		return fv.Int()
	}
	return int64(fv.Uint())
}

func (w *entityWriter) text(f *fieldPlan, s string) error {
	if !utf8.ValidString(s) {
		i := invalidAt(s)
		return invalid(f.name, "string is not valid UTF-8 (byte %d of %d is %#02x)", i, len(s), s[i])
	}
	return w.string(f, s, " as UTF-16")
}

// string writes s as the Edm.String of field f, or splits it (see
// splitText) when one property cannot hold it and f may be split; what
// says what s is in the error for a value too large.
func (w *entityWriter) string(f *fieldPlan, s, what string) error {
	mark, size, props := len(w.buf), w.size, w.props
	w.name(f.name, 4)
	var units int
	w.buf, units = appendString(w.buf, s)
	if 2*units <= MaxPropertySize && !(f.split && units > partUnits) {
		w.size += 2 * units
		return nil
	}
	if !f.split {
		return tooLarge(f, 2*units, what)
	}
	w.buf, w.size, w.props = w.buf[:mark], size, props
	w.splitText(f, s)
	return nil
}

func (w *entityWriter) guid(f *fieldPlan, s string) error {
	if s == "" {
		return nil
	}
	if !guidPattern.MatchString(s) {
		return fmt.Errorf("%w: tablestore: field %s: %q is not a GUID", etagstore.ErrInvalidInput, f.name, s)
	}
	w.name(f.name, 16)
	w.buf = append(append(append(w.buf, '"'), s...), '"')
	w.annotate(f.name, "Edm.Guid")
	return nil
}

func (w *entityWriter) dateTime(f *fieldPlan, t time.Time) error {
	if t.IsZero() {
		return nil // the zero time is no property; it decodes back to zero
	}
	t = t.UTC()
	if t.Before(minDateTime) {
		return invalid(f.name, "%s is before 1601, the earliest Edm.DateTime", t)
	}
	if t.Year() > maxYear {
		return invalid(f.name, "%s is after 9999, the latest Edm.DateTime", t)
	}
	w.name(f.name, 8)
	w.buf = append(t.AppendFormat(append(w.buf, '"'), "2006-01-02T15:04:05.0000000Z"), '"')
	w.annotate(f.name, "Edm.DateTime")
	return nil
}

func (w *entityWriter) binary(f *fieldPlan, fv reflect.Value) error {
	if fv.IsNil() {
		return nil
	}
	b := fv.Bytes()
	if len(b) > MaxPropertySize {
		if !f.split {
			return tooLarge(f, len(b), "")
		}
		w.splitBinary(f, b)
		return nil
	}
	w.name(f.name, 4+len(b))
	w.buf = append(base64.StdEncoding.AppendEncode(append(w.buf, '"'), b), '"')
	w.annotate(f.name, "Edm.Binary")
	return nil
}

// json stores a field of any other type as a string holding its JSON, by
// etagstore.JSON, which refuses what JSON would change.
func (w *entityWriter) json(f *fieldPlan, fv reflect.Value) error {
	j, err := etagstore.JSON.Marshal(fv.Interface())
	if err != nil {
		return jsonFieldError(f.name, err)
	}
	return w.string(f, string(j), " of JSON as UTF-16")
}

// jsonFieldError is the error for field name, held as JSON, that
// etagstore.JSON refused with err.
func jsonFieldError(name string, err error) error {
	var iv *etagstore.InvalidValueError
	if errors.As(err, &iv) {
		return &etagstore.InvalidValueError{Field: joinField(name, iv.Field), Reason: iv.Reason}
	}
	if errors.Is(err, etagstore.ErrInvalidInput) {
		// "etagstore: invalid input: tablestore: field F: …", the prefix once.
		msg := strings.TrimPrefix(err.Error(), etagstore.ErrInvalidInput.Error()+": ")
		return &fieldError{msg: fmt.Sprintf("%v: tablestore: field %s: %s", etagstore.ErrInvalidInput, name, msg), err: err}
	}
	return fmt.Errorf("%w: tablestore: field %s: %w", etagstore.ErrInvalidInput, name, err)
}

// fieldError is an error about one field, printed with the sentinel in
// front once, unwrapping to the error it describes.
type fieldError struct {
	msg string
	err error
}

func (e *fieldError) Error() string { return e.msg }
func (e *fieldError) Unwrap() error { return e.err }

// joinField puts property name in front of the path rest within it.
func joinField(name, rest string) string {
	switch {
	case rest == "":
		return name
	case rest[0] == '[':
		return name + rest
	}
	return name + "." + rest
}

// invalidAt is the index of the first byte of s that is not valid UTF-8.
func invalidAt(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
	}
	return len(s)
}

func appendDouble(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// Unmarshal decodes entity properties (as returned by the Table service,
// with or without type annotations) into v, a pointer to a struct or to a
// pointer to one (allocated when nil, as encoding/json does). Missing
// properties leave the zero value; unknown ones are ignored.
func (EntityCodec) Unmarshal(data []byte, v any) error {
	_, err := decodeEntity(data, v, false)
	return err
}

// Decode is Unmarshal that also returns what Marshal returns for the value
// it decoded, built from data as it decodes: a string property already
// written as Marshal writes it (as the Table service hands strings back)
// is copied, not encoded again. When data is that encoding byte for byte
// (Marshal writes properties in the order of their names, the SDK's
// order), Decode returns data itself: nothing is allocated for it. A
// Store calls it to start a read-modify-write, to tell an unchanged
// document without encoding the value it read a second time. The encoding
// is nil, with no error, when Marshal would refuse the value decoded.
func (EntityCodec) Decode(data []byte, v any) ([]byte, error) {
	return decodeEntity(data, v, true)
}

// decodeEntity decodes data into v, and when encode is set returns v's
// encoding.
func decodeEntity(data []byte, v any, encode bool) ([]byte, error) {
	rv, plan, err := target(v)
	if err != nil {
		return nil, err
	}
	props, err := scanEntity(data, plan)
	if err != nil {
		return nil, err
	}
	rv.SetZero()
	var w entityWriter
	if encode {
		w = scratchWriter()
		defer w.release()
	}
	for _, i := range plan.order {
		f := &plan.fields[i]
		fv := rv.FieldByIndex(f.index)
		canonical, size, err := props.decode(i, f, fv)
		if err != nil {
			return nil, fmt.Errorf("tablestore: property %s: %w", f.name, err)
		}
		switch {
		case !encode:
		case f.omitted(fv): // Marshal writes no property for it
			continue
		case canonical:
			w.raw(f, props.raws[i], size)
		case w.field(f, fv) != nil:
			encode = false // Marshal refuses the value: no encoding
		}
		w.check(f)
	}
	if !encode || w.over != "" {
		return nil, nil // Marshal would refuse the value: no encoding
	}
	w.buf = append(w.buf, '}')
	plan.sizeHint.Store(int64(len(w.buf)))
	if bytes.Equal(w.buf, data) {
		return data, nil
	}
	return bytes.Clone(w.buf), nil
}

// scratch holds the buffers in which Decode builds an encoding to compare
// with the data it decodes (*[]byte).
var scratch sync.Pool

// maxScratch is the largest buffer scratch keeps: an entity's limit with
// room for its JSON.
const maxScratch = 2 * MaxEntitySize

// scratchWriter returns an entityWriter writing into a buffer of scratch;
// release gives the buffer back.
func scratchWriter() entityWriter {
	buf, _ := scratch.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	return entityWriter{buf: append((*buf)[:0], '{'), pooled: buf}
}

// release gives w's buffer back to scratch; w's bytes are not to be used
// after it.
func (w *entityWriter) release() {
	if w.pooled != nil && cap(w.buf) <= maxScratch {
		*w.pooled = w.buf[:0]
		scratch.Put(w.pooled)
	}
	w.buf, w.pooled = nil, nil
}

// entityProps are the raw values of an entity's properties, by field of
// its plan.
type entityProps struct {
	raws  [][]byte
	parts [][][]byte // per field, the parts of a split value (see split.go)
}

// scanEntity finds the values of plan's fields in data.
func scanEntity(data []byte, plan *typePlan) (entityProps, error) {
	p := entityProps{raws: make([][]byte, len(plan.fields))}
	err := eachMember(data, func(name, value, _ []byte) bool {
		if i, ok := plan.byName[string(name)]; ok {
			p.raws[i] = value
		} else if base, n, ok := partOf(name); ok {
			p.parts = addPart(p.parts, plan, base, n, value)
		}
		return true
	})
	if err != nil {
		return p, fmt.Errorf("tablestore: entity is not a JSON object: %w", err)
	}
	return p, nil
}

// decode sets fv, field i (f) of the plan, from its property; canonical
// and size as decodeField reports them.
func (p *entityProps) decode(i int, f *fieldPlan, fv reflect.Value) (canonical bool, size int, err error) {
	switch raw := p.raws[i]; {
	case raw == nil || string(raw) == "null":
		return false, 0, nil
	case raw[0] != '"' && splittable(f.kind) && p.parts != nil && p.parts[i] != nil:
		return false, 0, joinParts(fv, f, string(raw), p.parts[i])
	default:
		return decodeField(fv, f.kind, raw)
	}
}

// addPart records value as part n of the field named base, if T has one
// that may have been split.
func addPart(parts [][][]byte, plan *typePlan, base []byte, n int, value []byte) [][][]byte {
	i, ok := plan.byName[string(base)]
	if !ok || !splittable(plan.fields[i].kind) {
		return parts
	}
	if parts == nil {
		parts = make([][][]byte, len(plan.fields))
	}
	if parts[i] == nil {
		parts[i] = make([][]byte, maxParts+1)
	}
	parts[i][n] = value
	return parts
}

// raw writes field f's value, raw, which is already as Marshal writes it
// (an Edm.String or Edm.Binary), of size bytes as Azure counts them.
func (w *entityWriter) raw(f *fieldPlan, raw []byte, size int) {
	w.name(f.name, 4+size)
	w.buf = append(w.buf, raw...)
	if f.kind == edmBinary {
		w.annotate(f.name, "Edm.Binary")
	}
}

// target is v, a non-nil pointer to a struct (or to pointers to one),
// with the pointers allocated, and the struct's plan.
func target(v any) (reflect.Value, *typePlan, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return rv, nil, fmt.Errorf("%w: tablestore: Unmarshal needs a non-nil pointer, got %T", etagstore.ErrInvalidInput, v)
	}
	t := rv.Type().Elem()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	plan, err := planFor(t)
	if err != nil {
		return rv, nil, err
	}
	for rv = rv.Elem(); rv.Kind() == reflect.Pointer; rv = rv.Elem() {
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
	}
	return rv, plan, nil
}

// decodeField sets fv, a field of the given kind, to the property value
// raw, and reports whether raw is exactly what Marshal writes for it (told
// for strings and binaries only: the others are small) and, if so, the
// value's size as Azure counts it.
func decodeField(fv reflect.Value, kind edmKind, raw []byte) (canonical bool, size int, err error) {
	var t jsonText
	if raw[0] == '"' {
		if t, err = unquote(raw); err != nil {
			return false, 0, err
		}
	} else {
		t.text = string(raw)
	}
	switch kind {
	case edmString:
		fv.SetString(t.text)
		return t.canonical, 2 * t.units, nil
	case edmGUID:
		fv.SetString(t.text)
	case edmBinary:
		return decodeBinary(fv, t)
	default:
		return false, 0, decodeScalar(fv, kind, t.text)
	}
	return false, 0, nil
}

// decodeBinary sets fv to the bytes base64 text t holds.
func decodeBinary(fv reflect.Value, t jsonText) (canonical bool, size int, err error) {
	b, err := base64.StdEncoding.Strict().DecodeString(t.text)
	if err == nil {
		fv.SetBytes(b)
		return t.canonical, len(b), nil
	}
	if b, err = base64.StdEncoding.DecodeString(t.text); err != nil {
		return false, 0, err
	}
	fv.SetBytes(b)
	return false, 0, nil
}

// decodeScalar sets fv, of a kind other than string, GUID and binary, to
// the value text holds.
func decodeScalar(fv reflect.Value, kind edmKind, text string) error {
	switch kind {
	case edmBool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return err
		}
		fv.SetBool(b)
	case edmInt32, edmInt64:
		return decodeInt(fv, kind, text)
	case edmDouble:
		f, err := parseDouble(text, fv.Type().Bits())
		if err != nil {
			return err
		}
		fv.SetFloat(f)
	case edmDateTime:
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return err
		}
		fv.Set(reflect.ValueOf(t.UTC()))
	case edmJSON:
		p := reflect.New(fv.Type())
		if err := json.Unmarshal([]byte(text), p.Interface()); err != nil {
			return err
		}
		fv.Set(p.Elem())
	}
	return nil
}

// decodeInt sets the integer field fv (of kind edmInt32 or edmInt64) to
// text; an unsigned field takes an Int64's two's complement back.
func decodeInt(fv reflect.Value, kind edmKind, text string) error {
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return err
	}
	if fv.CanInt() {
		if fv.OverflowInt(n) {
			return fmt.Errorf("%d overflows %s", n, fv.Type())
		}
		fv.SetInt(n)
		return nil
	}
	u := uint64(n)
	if kind == edmInt32 && n < 0 || fv.OverflowUint(u) {
		return fmt.Errorf("%d overflows %s", n, fv.Type())
	}
	fv.SetUint(u)
	return nil
}

// parseDouble parses an Edm.Double, NaN and the infinities as the Table
// service writes them included.
func parseDouble(text string, bits int) (float64, error) {
	switch text {
	case "NaN":
		return math.NaN(), nil
	case "Infinity", "INF":
		return math.Inf(1), nil
	case "-Infinity", "-INF":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(text, bits)
}
