package fields

import (
	"encoding"
	"reflect"
	"unicode/utf8"
	"unsafe"
)

// cycleDepth is the nesting of pointers, slices and maps past which
// suspect watches for cycles, as encoding/json does (which refuses them).
const cycleDepth = 1000

// Suspect reports whether json would change something in v, a value of
// the plan's type, silently: a string or map key that is not valid UTF-8,
// or such a text from a TextMarshaler. Types that hold no string (nor
// interface, map or text marshaler) are not walked at all; the walk
// allocates nothing unless it meets a map of another type than
// map[string]string and map[string]any, or a text marshaler.
func (p *Plan) Suspect(v reflect.Value) bool { return p.check && p.suspect(v, 0) }

func (p *Plan) suspect(v reflect.Value, depth int) bool {
	if p.addr != pkOther && v.CanAddr() {
		if p.addr == pkText {
			return textSuspect(v.Addr())
		}
		return false // a json.Marshaler: its output is checked
	}
	switch p.kind {
	case pkString:
		return !utf8.ValidString(v.String())
	case pkText:
		return textSuspect(v)
	case pkStruct:
		return p.suspectStruct(v, depth)
	case pkPointer:
		return p.suspectPointer(v, depth)
	case pkList:
		return p.suspectList(v, depth)
	case pkMap:
		if v.Len() == 0 {
			return false
		}
		if depth++; depth > cycleDepth {
			return p.suspectDeep(v, depth, seenKey{v.UnsafePointer(), 0})
		}
		return p.suspectMap(v, depth)
	case pkInterface:
		if v.IsNil() {
			return false
		}
		e := v.Elem()
		q := PlanOf(e.Type())
		return q.check && q.suspect(e, depth)
	}
	return false
}

func (p *Plan) suspectStruct(v reflect.Value, depth int) bool {
	for i := range p.fields {
		f := &p.fields[i]
		if !f.plan.check {
			continue
		}
		if fv, ok := f.Value(v); ok && f.plan.suspect(fv, depth) {
			return true
		}
	}
	return false
}

func (p *Plan) suspectPointer(v reflect.Value, depth int) bool {
	if v.IsNil() || !p.elem.check {
		return false
	}
	if depth++; depth > cycleDepth {
		return p.suspectDeep(v, depth, seenKey{v.UnsafePointer(), 0})
	}
	return p.elem.suspect(v.Elem(), depth)
}

func (p *Plan) suspectList(v reflect.Value, depth int) bool {
	if !p.elem.check || v.Len() == 0 {
		return false
	}
	if v.Kind() == reflect.Slice {
		if depth++; depth > cycleDepth {
			return p.suspectDeep(v, depth, seenKey{v.UnsafePointer(), v.Len()})
		}
	}
	for i := range v.Len() {
		if p.elem.suspect(v.Index(i), depth) {
			return true
		}
	}
	return false
}

func (p *Plan) suspectMap(v reflect.Value, depth int) bool {
	if v.CanInterface() {
		switch m := v.Interface().(type) {
		case map[string]string:
			return suspectStrings(m)
		case map[string]any:
			return suspectAnys(m, depth)
		}
	}
	for it := v.MapRange(); it.Next(); {
		if p.suspectKey(it.Key()) {
			return true
		}
		if p.elem.check && p.elem.suspect(it.Value(), depth) {
			return true
		}
	}
	return false
}

// suspectStrings is suspectMap for a map[string]string, without
// reflection.
func suspectStrings(m map[string]string) bool {
	for k, s := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(s) {
			return true
		}
	}
	return false
}

// suspectAnys is suspectMap for a map[string]any, with reflection only for
// the values.
func suspectAnys(m map[string]any, depth int) bool {
	for k, e := range m {
		if !utf8.ValidString(k) {
			return true
		}
		if e != nil {
			ev := reflect.ValueOf(e)
			if q := PlanOf(ev.Type()); q.check && q.suspect(ev, depth) {
				return true
			}
		}
	}
	return false
}

// suspectKey reports whether json would change the map key k.
func (p *Plan) suspectKey(k reflect.Value) bool {
	switch p.key {
	case pkString:
		return !utf8.ValidString(k.String())
	case pkText:
		return textSuspect(k)
	}
	return false
}

type seenKey struct {
	ptr unsafe.Pointer
	len int
}

// seenPath holds the pointers, slices and maps on the path suspect is
// walking past cycleDepth.
type seenPath map[seenKey]bool

// suspectDeep is suspect for a pointer, slice or map past cycleDepth: it
// stops at a cycle (json refuses it) and otherwise goes on. Values this
// deep are rare; it allocates a map per call.
func (p *Plan) suspectDeep(v reflect.Value, depth int, k seenKey) bool {
	return p.deep(v, depth, k, seenPath{})
}

// deep walks the pointer, slice or map v with key k, unless it is already
// on the path (a cycle).
func (p *Plan) deep(v reflect.Value, depth int, k seenKey, seen seenPath) bool {
	if seen[k] {
		return false
	}
	seen[k] = true
	defer delete(seen, k)
	switch p.kind {
	case pkPointer:
		return p.elem.suspectSeen(v.Elem(), depth, seen)
	case pkList:
		return p.elem.suspectSeenElems(v, depth, seen)
	case pkMap:
		for it := v.MapRange(); it.Next(); {
			if p.suspectKey(it.Key()) || p.elem.suspectSeen(it.Value(), depth, seen) {
				return true
			}
		}
	}
	return false
}

// suspectSeen is suspect below cycleDepth, where every pointer, slice and
// map goes through deep.
func (p *Plan) suspectSeen(v reflect.Value, depth int, seen seenPath) bool {
	if !p.check {
		return false
	}
	if p.addr != pkOther && v.CanAddr() {
		return p.addr == pkText && textSuspect(v.Addr())
	}
	switch p.kind {
	case pkStruct:
		for i := range p.fields {
			f := &p.fields[i]
			if fv, ok := f.Value(v); ok && f.plan.suspectSeen(fv, depth, seen) {
				return true
			}
		}
		return false
	case pkPointer, pkMap, pkList:
		return p.suspectSeenRef(v, depth, seen)
	case pkInterface:
		if v.IsNil() {
			return false
		}
		e := v.Elem()
		return PlanOf(e.Type()).suspectSeen(e, depth, seen)
	}
	return p.suspect(v, depth)
}

// suspectSeenRef is suspectSeen for a pointer, map, slice or array.
func (p *Plan) suspectSeenRef(v reflect.Value, depth int, seen seenPath) bool {
	if v.Kind() == reflect.Array {
		return p.elem.suspectSeenElems(v, depth, seen) // an array holds no cycle of its own
	}
	if v.IsNil() {
		return false
	}
	k := seenKey{ptr: v.UnsafePointer()}
	if v.Kind() == reflect.Slice {
		k.len = v.Len()
	}
	return p.deep(v, depth+1, k, seen)
}

// suspectSeenElems is suspectSeen for each element of the slice or array
// v, p being the elements' plan.
func (p *Plan) suspectSeenElems(v reflect.Value, depth int, seen seenPath) bool {
	for i := range v.Len() {
		if p.suspectSeen(v.Index(i), depth, seen) {
			return true
		}
	}
	return false
}

// textSuspect reports whether the text of the TextMarshaler v is not
// valid UTF-8 (json would change it). A failing MarshalText is json's to
// report.
func textSuspect(v reflect.Value) bool {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() || !v.CanInterface() {
		return false
	}
	tm, ok := v.Interface().(encoding.TextMarshaler)
	if !ok {
		return false
	}
	text, err := tm.MarshalText()
	return err == nil && !utf8.Valid(text)
}
