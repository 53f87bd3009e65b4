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
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Azure Table limits (Understanding the Table service data model).
const (
	// MaxProperties is the number of properties a document of yours may
	// have: Azure allows 252 custom properties and etagstore keeps its
	// bookkeeping (recent write ids) in one of them.
	MaxProperties = 251
	// MaxPropertySize is the largest string (as UTF-16) or binary property.
	MaxPropertySize = 64 << 10
	// MaxEntitySize is Azure's limit for a whole entity.
	MaxEntitySize = 1 << 20
	// reserveForKeys is kept free of MaxEntitySize for the PartitionKey and
	// RowKey (at most 1 KiB each) and the bookkeeping property.
	reserveForKeys = 4 + 2*maxKeyBytes + 8 + 2*len(MetaProperty) + 4 + 2*driver.MaxMetaLen
)

// MetaProperty is the entity property in which etagstore keeps the ids of
// the last few writes. It is not part of your document.
const MetaProperty = "etagstoreMeta"

// EntityCodec maps a struct to Azure Table entity properties, the default
// Codec of a table Backend. Exported fields become properties named like
// encoding/json names them (a `json:"name"` tag renames, `json:"-"` skips),
// with these EDM types:
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
// A document too large for one property is refused, never split. Names
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
}

type typePlan struct {
	fields []fieldPlan
	err    error
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
	plans.Store(t, p)
	return p, p.err
}

func buildPlan(t reflect.Type) ([]fieldPlan, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: tablestore: a table document must be a struct, not %s", etagstore.ErrInvalidInput, t)
	}
	var fields []fieldPlan
	seen := map[string]string{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct || !reachable(t, f.Index) {
			continue // embedded structs are flattened by VisibleFields
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" && !strings.HasPrefix(tag, "-,") {
				continue
			}
			if n != "" && n != "-" {
				name = n
			}
		}
		if reservedNames[name] || strings.HasPrefix(strings.ToLower(name), "odata.") {
			return nil, fmt.Errorf("%w: tablestore: field %s of %s uses the reserved property name %q", etagstore.ErrInvalidInput, f.Name, t, name)
		}
		if !identifier.MatchString(name) {
			return nil, fmt.Errorf("%w: tablestore: field %s of %s: %q is not a valid property name (letters, digits and _, at most 255)", etagstore.ErrInvalidInput, f.Name, t, name)
		}
		if other, dup := seen[name]; dup {
			return nil, fmt.Errorf("%w: tablestore: fields %s and %s of %s both map to property %q", etagstore.ErrInvalidInput, other, f.Name, t, name)
		}
		seen[name] = f.Name
		kind := kindOf(f.Type)
		if f.Tag.Get("table") == "guid" {
			if f.Type.Kind() != reflect.String {
				return nil, fmt.Errorf("%w: tablestore: field %s of %s: the guid option needs a string field", etagstore.ErrInvalidInput, f.Name, t)
			}
			kind = edmGUID
		}
		fields = append(fields, fieldPlan{index: f.Index, name: name, kind: kind})
	}
	if len(fields) > MaxProperties {
		return nil, fmt.Errorf("%w: tablestore: %s has %d fields, a table entity can hold %d", etagstore.ErrTooLarge, t, len(fields), MaxProperties)
	}
	return fields, nil
}

// reachable reports whether the field at index is t's own field or promoted
// through exported embedded structs (not pointers), so that it can be read
// and set without allocation or panics.
func reachable(t reflect.Type, index []int) bool {
	for _, i := range index[:len(index)-1] {
		f := t.Field(i)
		if !f.IsExported() || f.Type.Kind() != reflect.Struct {
			return false
		}
		t = f.Type
	}
	return true
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

// invalid is the error for a field's value that cannot be stored exactly.
func invalid(field, format string, args ...any) error {
	return &etagstore.InvalidValueError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Marshal encodes the struct v (or pointer to one) as an entity-properties
// JSON object with odata type annotations.
func (EntityCodec) Marshal(v any) ([]byte, error) {
	rv, err := structValue(v)
	if err != nil {
		return nil, err
	}
	plan, err := planFor(rv.Type())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	size := 0
	first := true
	prop := func(name string, value []byte, edm string) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		writeString(&buf, name)
		buf.WriteByte(':')
		buf.Write(value)
		if edm != "" {
			buf.WriteByte(',')
			writeString(&buf, name+"@odata.type")
			buf.WriteByte(':')
			writeString(&buf, edm)
		}
	}
	for _, f := range plan.fields {
		fv := rv.FieldByIndex(f.index)
		var (
			value []byte
			edm   string
			vsize int
		)
		switch f.kind {
		case edmString, edmGUID:
			s := fv.String()
			if !utf8.ValidString(s) {
				i := invalidAt(s)
				return nil, invalid(f.name, "string is not valid UTF-8 (byte %d of %d is %#02x)", i, len(s), s[i])
			}
			vsize = 4 + 2*len(utf16.Encode([]rune(s)))
			if vsize-4 > MaxPropertySize {
				return nil, fmt.Errorf("%w: tablestore: field %s is %d bytes as UTF-16, a property holds %d", etagstore.ErrTooLarge, f.name, vsize-4, MaxPropertySize)
			}
			if f.kind == edmGUID {
				if s == "" {
					continue
				}
				if !guidPattern.MatchString(s) {
					return nil, fmt.Errorf("%w: tablestore: field %s: %q is not a GUID", etagstore.ErrInvalidInput, f.name, s)
				}
				edm, vsize = "Edm.Guid", 16
			}
			value = jsonString(s)
		case edmBool:
			value, vsize = strconv.AppendBool(nil, fv.Bool()), 1
		case edmInt32:
			var n int64
			if fv.CanInt() {
				n = fv.Int()
			} else {
				n = int64(fv.Uint())
			}
			value, vsize = strconv.AppendInt(nil, n, 10), 4
		case edmInt64:
			var n int64
			if fv.CanInt() {
				n = fv.Int()
			} else {
				n = int64(fv.Uint()) // two's complement above MaxInt64
			}
			value, edm, vsize = jsonString(strconv.FormatInt(n, 10)), "Edm.Int64", 8
		case edmDouble:
			value, edm, vsize = formatDouble(fv.Float(), fv.Type().Bits()), "Edm.Double", 8
		case edmDateTime:
			t := fv.Interface().(time.Time)
			if t.IsZero() {
				continue // the zero time is no property; it decodes back to zero
			}
			t = t.UTC()
			if t.Before(minDateTime) {
				return nil, invalid(f.name, "%s is before 1601, the earliest Edm.DateTime", t)
			}
			if t.Year() > maxYear {
				return nil, invalid(f.name, "%s is after 9999, the latest Edm.DateTime", t)
			}
			value, edm, vsize = jsonString(t.Format("2006-01-02T15:04:05.0000000Z")), "Edm.DateTime", 8
		case edmBinary:
			b := fv.Bytes()
			if fv.IsNil() {
				continue
			}
			if len(b) > MaxPropertySize {
				return nil, fmt.Errorf("%w: tablestore: field %s is %d bytes, a property holds %d", etagstore.ErrTooLarge, f.name, len(b), MaxPropertySize)
			}
			value, edm, vsize = jsonString(base64.StdEncoding.EncodeToString(b)), "Edm.Binary", 4+len(b)
		case edmJSON:
			j, err := etagstore.JSON.Marshal(fv.Interface()) // refuses what JSON would change
			if err != nil {
				return nil, jsonFieldError(f.name, err)
			}
			s := string(j)
			vsize = 4 + 2*len(utf16.Encode([]rune(s)))
			if vsize-4 > MaxPropertySize {
				return nil, fmt.Errorf("%w: tablestore: field %s is %d bytes of JSON as UTF-16, a property holds %d", etagstore.ErrTooLarge, f.name, vsize-4, MaxPropertySize)
			}
			value = jsonString(s)
		}
		size += 8 + 2*len(f.name) + vsize
		prop(f.name, value, edm)
	}
	if size > MaxEntitySize-reserveForKeys {
		return nil, fmt.Errorf("%w: tablestore: document is %d bytes as an entity, the limit is %d", etagstore.ErrTooLarge, size, MaxEntitySize-reserveForKeys)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// jsonFieldError is the error for field name, held as JSON, that
// etagstore.JSON refused with err.
func jsonFieldError(name string, err error) error {
	var iv *etagstore.InvalidValueError
	if errors.As(err, &iv) {
		return &etagstore.InvalidValueError{Field: joinField(name, iv.Field), Reason: iv.Reason}
	}
	if errors.Is(err, etagstore.ErrInvalidInput) {
		return fmt.Errorf("tablestore: field %s: %w", name, err)
	}
	return fmt.Errorf("%w: tablestore: field %s: %w", etagstore.ErrInvalidInput, name, err)
}

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

func formatDouble(f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return jsonString("NaN")
	case math.IsInf(f, 1):
		return jsonString("Infinity")
	case math.IsInf(f, -1):
		return jsonString("-Infinity")
	}
	return strconv.AppendFloat(nil, f, 'g', -1, bits)
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

func writeString(buf *bytes.Buffer, s string) { buf.Write(jsonString(s)) }

// Unmarshal decodes entity properties (as returned by the Table service,
// with or without type annotations) into v, a pointer to a struct or to a
// pointer to one (allocated when nil, as encoding/json does). Missing
// properties leave the zero value; unknown ones are ignored.
func (EntityCodec) Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%w: tablestore: Unmarshal needs a non-nil pointer, got %T", etagstore.ErrInvalidInput, v)
	}
	t := rv.Type().Elem()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	plan, err := planFor(t)
	if err != nil {
		return err
	}
	for rv = rv.Elem(); rv.Kind() == reflect.Pointer; rv = rv.Elem() {
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
	}
	var props map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&props); err != nil {
		return fmt.Errorf("tablestore: entity is not a JSON object: %w", err)
	}
	rv.SetZero()
	for _, f := range plan.fields {
		raw, ok := props[f.name]
		if !ok || string(raw) == "null" {
			continue
		}
		if err := decodeField(rv.FieldByIndex(f.index), f.kind, raw); err != nil {
			return fmt.Errorf("tablestore: property %s: %w", f.name, err)
		}
	}
	return nil
}

func decodeField(fv reflect.Value, kind edmKind, raw json.RawMessage) error {
	// text is the value as a string: JSON strings unquoted, numbers as is.
	text := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return err
		}
	}
	switch kind {
	case edmString, edmGUID:
		fv.SetString(text)
	case edmBool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return err
		}
		fv.SetBool(b)
	case edmInt32, edmInt64:
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
	case edmDouble:
		var f float64
		switch text {
		case "NaN":
			f = math.NaN()
		case "Infinity", "INF":
			f = math.Inf(1)
		case "-Infinity", "-INF":
			f = math.Inf(-1)
		default:
			var err error
			if f, err = strconv.ParseFloat(text, fv.Type().Bits()); err != nil {
				return err
			}
		}
		fv.SetFloat(f)
	case edmDateTime:
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return err
		}
		fv.Set(reflect.ValueOf(t.UTC()))
	case edmBinary:
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return err
		}
		fv.SetBytes(b)
	case edmJSON:
		p := reflect.New(fv.Type())
		if err := json.Unmarshal([]byte(text), p.Interface()); err != nil {
			return err
		}
		fv.Set(p.Elem())
	}
	return nil
}
