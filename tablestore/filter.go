package tablestore

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/etagstore/etagstore/driver"
)

// Filter is an OData $filter expression built from typed values, so that a
// value can never change the expression's shape: strings are quoted with
// ' doubled, numbers, times, GUIDs and binary values get their OData
// literal forms.
//
// The zero Filter matches everything (no $filter is sent), and
// Not(Filter{}) matches nothing: its expression is that of
// Lt("PartitionKey", ""), as no string sorts before the empty one. Both
// follow logic through And, Or and Not, on either side, where nothing is
// Not(Filter{}):
//   - f.And(Filter{}) and Filter{}.And(f) are f;
//   - f.Or(Filter{}) and Filter{}.Or(f) match everything (String "");
//   - Not(Not(Filter{})) is the zero Filter again;
//   - nothing.And(f) and f.And(nothing) match nothing;
//   - nothing.Or(f) and f.Or(nothing) are f.
//
// A filter an error made (see Err) stays that error through all three.
//
// A Filter also keeps each property it compares and the value compared
// with, through And, Or and Not, so that Query and QueryPage can check it
// against the Store's document type before sending anything: every
// property named must be one the document type stores (or PartitionKey,
// RowKey, Timestamp), and every value must be of the property's EDM type
// (see EntityCodec): a string for Edm.String and fields held as JSON,
// GUID for Edm.Guid, bool for Edm.Boolean, int32 for Edm.Int32, int or
// int64 for Edm.Int64, float64 for Edm.Double, time.Time
// for Edm.DateTime and Timestamp, []byte for Edm.Binary, a string for
// PartitionKey and RowKey. A filter that fails the check is refused with
// etagstore.ErrInvalidInput naming the property (and, for a value of the
// wrong type, both types). The check is skipped for a Store whose document
// type is not a struct (or pointer to one), or whose codec is not
// EntityCodec.
type Filter struct {
	expr string
	err  error
	// terms are the comparisons of the filter's parts, in order, each a
	// line "prop type" with the EDM type of the value's literal. A part
	// that And or Or makes moot (f.Or(Filter{}) is everything) leaves
	// expr but keeps its terms, so it is still checked. A string keeps
	// Filter comparable, equal for equal filters.
	terms string
}

// nothingExpr is the expression of the filter that matches nothing,
// Not(Filter{}): no string sorts before the empty one, and every entity
// has a PartitionKey. It names only a system property, so it needs no
// terms: checkFilter has nothing to refuse in it.
const nothingExpr = "PartitionKey lt ''"

// matchesAll and matchesNone classify a filter by its expression.
func (f Filter) matchesAll() bool  { return f.expr == "" }
func (f Filter) matchesNone() bool { return f.expr == nothingExpr }

// String returns the OData expression: "" for the zero Filter and any
// filter matching everything (no $filter is sent), and that of
// Lt("PartitionKey", "") for Not(Filter{}).
func (f Filter) String() string { return f.expr }

// Err reports a property name or value that could not be expressed.
func (f Filter) Err() error { return f.err }

// GUID marks a string as an Edm.Guid value in a filter.
type GUID string

func compare(op, prop string, value any) Filter {
	if !identifier.MatchString(prop) {
		return Filter{err: fmt.Errorf("tablestore: %q is not a property name", prop)}
	}
	lit, err := literal(value)
	if err != nil {
		return Filter{err: fmt.Errorf("tablestore: filter on %s: %w", prop, err)}
	}
	return Filter{expr: prop + " " + op + " " + lit, terms: prop + " " + literalType(value) + "\n"}
}

// Eq matches entities whose property prop equals value.
func Eq(prop string, value any) Filter { return compare("eq", prop, value) }

// Ne matches entities whose property prop differs from value.
func Ne(prop string, value any) Filter { return compare("ne", prop, value) }

// Lt matches prop < value.
func Lt(prop string, value any) Filter { return compare("lt", prop, value) }

// Le matches prop <= value.
func Le(prop string, value any) Filter { return compare("le", prop, value) }

// Gt matches prop > value.
func Gt(prop string, value any) Filter { return compare("gt", prop, value) }

// Ge matches prop >= value.
func Ge(prop string, value any) Filter { return compare("ge", prop, value) }

// And matches entities matching both f and g. With the zero Filter on
// either side it is the other one; with one that matches nothing
// (Not(Filter{})) it matches nothing. An error in f, else in g, is kept.
func (f Filter) And(g Filter) Filter { return join(f, "and", g) }

// Or matches entities matching f or g. With the zero Filter on either
// side it matches everything (its String is ""), not the other side; with
// one that matches nothing (Not(Filter{})) it is the other one. An error
// in f, else in g, is kept.
func (f Filter) Or(g Filter) Filter { return join(f, "or", g) }

// Not matches entities not matching f. Not of a filter matching
// everything (the zero Filter) matches nothing (its expression is that of
// Lt("PartitionKey", "")), and Not of that matches everything again. An
// error in f is kept.
func Not(f Filter) Filter {
	switch {
	case f.err != nil:
		return f
	case f.matchesAll():
		return Filter{expr: nothingExpr, terms: f.terms}
	case f.matchesNone():
		return Filter{terms: f.terms}
	}
	return Filter{expr: "not (" + f.expr + ")", terms: f.terms}
}

// join is f op g, op "and" or "or". A side matching everything or nothing
// decides the result or drops out of it, as logic has it; the terms of
// both sides are kept either way.
func join(f Filter, op string, g Filter) Filter {
	switch {
	case f.err != nil:
		return f
	case g.err != nil:
		return g
	}
	terms := f.terms + g.terms
	// absorbing is the side that decides op (everything for or, nothing
	// for and); neutral is the one that leaves the other side as it is.
	absorbing, neutral := Filter.matchesNone, Filter.matchesAll
	if op == "or" {
		absorbing, neutral = neutral, absorbing
	}
	switch {
	case absorbing(f):
		return Filter{expr: f.expr, terms: terms}
	case absorbing(g):
		return Filter{expr: g.expr, terms: terms}
	case neutral(f):
		return Filter{expr: g.expr, terms: terms}
	case neutral(g):
		return Filter{expr: f.expr, terms: terms}
	}
	return Filter{expr: "(" + f.expr + ") " + op + " (" + g.expr + ")", terms: terms}
}

// prefixRange matches string property prop starting with prefix.
func prefixRange(prop, prefix string) Filter {
	if prefix == "" {
		return Filter{}
	}
	f := Ge(prop, prefix)
	if next, ok := successor(prefix); ok {
		f = f.And(Lt(prop, next))
	}
	return f
}

// successor returns the smallest string greater than every string that has
// prefix as a prefix, in the Table service's order: by UTF-16 code units.
// It increments the last code unit, dropping trailing U+FFFF units, and
// keeps the result valid UTF-16: a high surrogate gets its smallest low
// half (U+D7FF is followed by U+10000), and a pair whose low half cannot
// grow moves on to the next high surrogate, or, at U+10FFFF, to U+E000,
// which follows every pair.
func successor(prefix string) (string, bool) {
	u := utf16.Encode([]rune(prefix))
	for len(u) > 0 {
		n := len(u)
		switch last := u[n-1]; {
		case last == 0xFFFF:
			u = u[:n-1] // nothing follows U+FFFF: carry
		case last >= 0xDC00 && last <= 0xDFFF: // the low half of a pair
			switch high := u[n-2]; {
			case last < 0xDFFF:
				u[n-1]++
				return string(utf16.Decode(u)), true
			case high < 0xDBFF:
				u[n-2], u[n-1] = high+1, 0xDC00
				return string(utf16.Decode(u)), true
			}
			// U+10FFFF, the last pair: U+E000 follows every pair.
			return string(utf16.Decode(append(u[:n-2], 0xE000))), true
		case last == 0xD7FF:
			u[n-1] = 0xD800
			return string(utf16.Decode(append(u, 0xDC00))), true
		default:
			u[n-1]++
			return string(utf16.Decode(u)), true
		}
	}
	return "", false
}

// literal renders value in OData's literal syntax.
func literal(value any) (string, error) {
	switch v := value.(type) {
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'", nil
	case GUID:
		if !guidPattern.MatchString(string(v)) {
			return "", fmt.Errorf("%q is not a GUID", string(v))
		}
		return "guid'" + string(v) + "'", nil
	case bool:
		return strconv.FormatBool(v), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case int:
		return strconv.FormatInt(int64(v), 10) + "L", nil
	case int64:
		return strconv.FormatInt(v, 10) + "L", nil
	case float64:
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s, nil
	case time.Time:
		return "datetime'" + v.UTC().Format("2006-01-02T15:04:05.0000000Z") + "'", nil
	case []byte:
		return "X'" + hex.EncodeToString(v) + "'", nil
	}
	return "", fmt.Errorf("unsupported filter value type %T", value)
}

// edmNames are the EDM type names of the kinds, as filter errors give them.
var edmNames = [...]string{
	edmString:   "Edm.String",
	edmGUID:     "Edm.Guid",
	edmBool:     "Edm.Boolean",
	edmInt32:    "Edm.Int32",
	edmInt64:    "Edm.Int64",
	edmDouble:   "Edm.Double",
	edmDateTime: "Edm.DateTime",
	edmBinary:   "Edm.Binary",
	edmJSON:     "Edm.String (JSON)",
}

// systemKinds are the properties every entity has.
var systemKinds = map[string]edmKind{"PartitionKey": edmString, "RowKey": edmString, "Timestamp": edmDateTime}

// fits reports whether a value whose literal is of EDM type literal (see
// literalType) may be compared with a property of kind k: the types are
// the same (a field held as JSON is an Edm.String). An Int32 property
// takes no Int64 literal: Azurite answers 2L on one with a 500.
func fits(k edmKind, literal string) bool {
	if k == edmJSON {
		return literal == "Edm.String"
	}
	return literal == edmNames[k]
}

// checkFilter checks f against the documents of type t, as stored by
// codec: each property f compares must be one t stores (or a system
// property), not one it may split across properties (a large value is
// not in the property itself), compared with a value of its type. A t that is not a struct
// (or pointer to one), or a codec other than EntityCodec, is not checked.
func checkFilter(f Filter, t reflect.Type, codec any) error {
	if f.terms == "" {
		return nil
	}
	if _, ok := codec.(EntityCodec); !ok {
		return nil
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	plan, err := planFor(t)
	if err != nil {
		return nil // the Store refuses t itself
	}
	kinds := make(map[string]edmKind, len(plan.fields)+len(systemKinds))
	for name, k := range systemKinds {
		kinds[name] = k
	}
	split := map[string]bool{}
	for _, fp := range plan.fields {
		kinds[fp.name] = fp.kind
		split[fp.name] = fp.split
	}
	for tm := range strings.Lines(f.terms) {
		prop, lit, _ := strings.Cut(strings.TrimSuffix(tm, "\n"), " ")
		k, ok := kinds[prop]
		if !ok {
			return fmt.Errorf("%w: tablestore: filter names property %q, which %s does not store", driver.ErrInvalidInput, prop, t)
		}
		if split[prop] {
			return fmt.Errorf("%w: tablestore: filter names property %q, which %s may store split across properties (table:\"split\"): the service cannot compare it", driver.ErrInvalidInput, prop, t)
		}
		if !fits(k, lit) {
			return fmt.Errorf("%w: tablestore: filter compares property %q (%s) with an %s value", driver.ErrInvalidInput, prop, edmNames[k], lit)
		}
	}
	return nil
}

// literalType is the EDM type of the literal literal() renders for v.
func literalType(v any) string {
	switch v.(type) {
	case string:
		return "Edm.String"
	case GUID:
		return "Edm.Guid"
	case bool:
		return "Edm.Boolean"
	case int32:
		return "Edm.Int32"
	case int, int64:
		return "Edm.Int64"
	case float64:
		return "Edm.Double"
	case time.Time:
		return "Edm.DateTime"
	case []byte:
		return "Edm.Binary"
	}
	return "unsupported"
}
