package fields

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"
)

// Problem is a value json would change or refuse, and where it is.
type Problem struct {
	// Field is the path of the value by JSON names: Title, Tags[2],
	// Attrs["k"], Items[0].At; empty for the value itself.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Locate names the first value in v, a value of the plan's type, that json
// would change or refuse, or returns nil. It is meant to run after
// something was found (by Suspect or by json), and may allocate.
func (p *Plan) Locate(v reflect.Value) *Problem { return p.locate(v, 0) }

func (p *Plan) locate(v reflect.Value, depth int) *Problem {
	if depth > 2*cycleDepth {
		return nil // most likely a cycle: json says so
	}
	if p.addr != pkOther && v.CanAddr() {
		return marshalerProblem(v.Addr(), p.addr)
	}
	switch p.kind {
	case pkStruct:
		return p.locateStruct(v, depth)
	case pkPointer:
		if !v.IsNil() {
			return p.elem.locate(v.Elem(), depth+1)
		}
	case pkList:
		return p.locateList(v, depth)
	case pkMap:
		return p.locateMap(v, depth)
	case pkInterface:
		if !v.IsNil() {
			e := v.Elem()
			return PlanOf(e.Type()).locate(e, depth+1)
		}
	default:
		return p.scalarProblem(v)
	}
	return nil
}

// scalarProblem is the problem of v, a value that holds no other.
func (p *Plan) scalarProblem(v reflect.Value) *Problem {
	switch p.kind {
	case pkString:
		if s := v.String(); !utf8.ValidString(s) {
			return &Problem{Reason: "string is not valid UTF-8" + badByte([]byte(s))}
		}
	case pkFloat:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return &Problem{Reason: fmt.Sprintf("%v cannot be stored as JSON", f)}
		}
	case pkMarshaler, pkText:
		return marshalerProblem(v, p.kind)
	case pkUnsupported:
		return &Problem{Reason: fmt.Sprintf("JSON cannot hold a %s", v.Type())}
	}
	return nil
}

func (p *Plan) locateStruct(v reflect.Value, depth int) *Problem {
	for i := range p.fields {
		f := &p.fields[i]
		fv, ok := f.Value(v)
		if !ok {
			continue
		}
		if e := f.plan.locate(fv, depth); e != nil {
			e.Field = joinPath(f.Name, e.Field)
			return e
		}
	}
	return nil
}

func (p *Plan) locateList(v reflect.Value, depth int) *Problem {
	for i := range v.Len() {
		if e := p.elem.locate(v.Index(i), depth+1); e != nil {
			e.Field = joinPath(fmt.Sprintf("[%d]", i), e.Field)
			return e
		}
	}
	return nil
}

// locateMap finds the first invalid key or value of map v.
func (p *Plan) locateMap(v reflect.Value, depth int) *Problem {
	for it := v.MapRange(); it.Next(); {
		name, e := p.mapKeyName(it.Key())
		if e != nil {
			return e
		}
		if e := p.elem.locate(it.Value(), depth+1); e != nil {
			e.Field = joinPath(fmt.Sprintf("[%q]", name), e.Field)
			return e
		}
	}
	return nil
}

// mapKeyName is how a map key appears in a field path, or the key's own
// problem.
func (p *Plan) mapKeyName(k reflect.Value) (string, *Problem) {
	switch p.key {
	case pkString:
		name := k.String()
		if !utf8.ValidString(name) {
			return "", &Problem{Reason: "map key is not valid UTF-8" + badByte([]byte(name))}
		}
		return name, nil
	case pkText:
		if e := marshalerProblem(k, pkText); e != nil {
			e.Reason = "map key: " + e.Reason
			return "", e
		}
	}
	return fmt.Sprint(k), nil
}

// marshalerProblem calls the MarshalJSON (kind pkMarshaler) or MarshalText
// (pkText) of v and reports an error or output that is not valid UTF-8.
func marshalerProblem(v reflect.Value, kind planKind) *Problem {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() || !v.CanInterface() {
		return nil
	}
	var (
		out []byte
		err error
	)
	switch m := v.Interface().(type) {
	case json.Marshaler:
		if kind != pkMarshaler {
			return nil
		}
		out, err = m.MarshalJSON()
	case encoding.TextMarshaler:
		out, err = m.MarshalText()
	default:
		return nil
	}
	switch {
	case err != nil:
		return &Problem{Reason: err.Error()}
	case !utf8.Valid(out) && kind == pkMarshaler:
		return &Problem{Reason: fmt.Sprintf("the MarshalJSON of %s wrote invalid UTF-8%s", v.Type(), badByte(out))}
	case !utf8.Valid(out):
		return &Problem{Reason: fmt.Sprintf("the text of %s is not valid UTF-8%s", v.Type(), badByte(out))}
	}
	return nil
}

// badByte says where b stops being valid UTF-8.
func badByte(b []byte) string {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Sprintf(" (byte %d of %d is %#02x)", i, len(b), b[i])
		}
		i += n
	}
	return ""
}

// joinPath puts segment seg (a JSON name, "[i]" or "[\"key\"]") in front
// of path rest.
func joinPath(seg, rest string) string {
	switch {
	case rest == "":
		return seg
	case rest[0] == '[':
		return seg + rest
	}
	return seg + "." + rest
}
