package tablestore

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Filter is an OData $filter expression built from typed values, so that a
// value can never change the expression's shape: strings are quoted with
// ' doubled, numbers, times, GUIDs and binary values get their OData
// literal forms. The zero Filter matches everything.
type Filter struct {
	expr string
	err  error
}

// String returns the OData expression ("" for the zero Filter).
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
	return Filter{expr: prop + " " + op + " " + lit}
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

// And matches entities matching both f and g.
func (f Filter) And(g Filter) Filter { return join(f, "and", g) }

// Or matches entities matching f or g.
func (f Filter) Or(g Filter) Filter { return join(f, "or", g) }

// Not matches entities not matching f.
func Not(f Filter) Filter {
	if f.err != nil || f.expr == "" {
		return f
	}
	return Filter{expr: "not (" + f.expr + ")"}
}

func join(f Filter, op string, g Filter) Filter {
	switch {
	case f.err != nil:
		return f
	case g.err != nil:
		return g
	case f.expr == "":
		return g
	case g.expr == "":
		return f
	}
	return Filter{expr: "(" + f.expr + ") " + op + " (" + g.expr + ")"}
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
// prefix as a prefix: prefix with its last character incremented.
func successor(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		base := prefix[:len(prefix)-size]
		switch {
		case r == utf8.MaxRune:
			prefix = base
			continue
		case r == 0xD7FF:
			r = 0xE000 // skip the surrogates
		default:
			r++
		}
		return base + string(r), true
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
