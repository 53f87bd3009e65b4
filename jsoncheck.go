package etagstore

// The JSON codec's check of what encoding/json would change silently
// (strings that are not valid UTF-8) or refuse without naming the field
// (NaN, ±Inf): a walk of the value planned once per type.

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"
)

// marshalJSON is JSON's Marshal: encoding/json, after a check for what it
// would change silently, and with the field named when it refuses a value.
// Types that hold no string (nor interface, map or text marshaler) are not
// walked at all; the walk allocates nothing unless it meets a map of
// another type than map[string]string and map[string]any, or a text
// marshaler.
func marshalJSON(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return json.Marshal(v) // null
	}
	p := planOf(rv.Type())
	if p.check && p.suspect(rv, 0) {
		if e := p.locate(rv, 0); e != nil {
			return nil, e
		}
		return nil, &InvalidValueError{Reason: "it holds text that is not valid UTF-8"}
	}
	data, err := json.Marshal(v)
	if err != nil {
		if e := p.locate(rv, 0); e != nil {
			return nil, e
		}
		if sentinelOf(err) != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if p.raw && !utf8.Valid(data) {
		if e := p.locate(rv, 0); e != nil {
			return nil, e
		}
		return nil, &InvalidValueError{Reason: "a json.Marshaler in it wrote invalid UTF-8"}
	}
	return data, nil
}

// planKind is how encoding/json treats a type, as far as the checks go.
type planKind uint8

const (
	pkOther       planKind = iota // nothing to check: bool, integers, []byte, …
	pkString                      // must be valid UTF-8
	pkFloat                       // NaN and ±Inf are refused by json
	pkStruct                      //
	pkPointer                     //
	pkList                        // slice or array
	pkMap                         //
	pkInterface                   // the dynamic value is checked by its own plan
	pkMarshaler                   // json.Marshaler: opaque, its output is checked
	pkText                        // encoding.TextMarshaler: its text must be valid UTF-8
	pkUnsupported                 // chan, func, complex: json refuses them
)

// valuePlan is what marshalJSON checks in a value of one type. Plans are
// built once per type and shared; they may form cycles (recursive types).
type valuePlan struct {
	typ  reflect.Type
	kind planKind
	// addr is pkMarshaler or pkText when only *T has the method: json uses
	// it for addressable values.
	addr   planKind
	key    planKind // a map's keys: pkString, pkText or pkOther
	check  bool     // a value may hold something json would change silently
	raw    bool     // a value may hold a json.Marshaler, whose output is checked
	elem   *valuePlan
	fields []planField
}

type planField struct {
	index int
	name  string // JSON name; "" for an embedded struct whose fields json promotes
	plan  *valuePlan
}

var (
	planCache         sync.Map // reflect.Type -> *valuePlan, complete plans only
	planMu            sync.Mutex
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
)

// lastPlan is the plan planOf returned last: most programs encode one
// document type far more than others.
var lastPlan atomic.Pointer[valuePlan]

func planOf(t reflect.Type) *valuePlan {
	if p := lastPlan.Load(); p != nil && p.typ == t {
		return p
	}
	if p, ok := planCache.Load(t); ok {
		lastPlan.Store(p.(*valuePlan))
		return p.(*valuePlan)
	}
	planMu.Lock()
	defer planMu.Unlock()
	b := planBuilder{made: map[reflect.Type]*valuePlan{}}
	p := b.plan(t)
	// check and raw spread from elements to what holds them, around
	// cycles too.
	for changed := true; changed; {
		changed = false
		for _, q := range b.made {
			c, r := q.check, q.raw
			if q.elem != nil {
				c, r = c || q.elem.check, r || q.elem.raw
			}
			for _, f := range q.fields {
				c, r = c || f.plan.check, r || f.plan.raw
			}
			if c != q.check || r != q.raw {
				q.check, q.raw, changed = c, r, true
			}
		}
	}
	for t, q := range b.made {
		planCache.Store(t, q)
	}
	return p
}

type planBuilder struct{ made map[reflect.Type]*valuePlan }

func (b *planBuilder) plan(t reflect.Type) *valuePlan {
	if p, ok := planCache.Load(t); ok {
		return p.(*valuePlan)
	}
	if p, ok := b.made[t]; ok {
		return p
	}
	p := &valuePlan{typ: t}
	b.made[t] = p
	switch {
	case t == timeType:
		p.kind = pkMarshaler // writes ASCII or refuses: nothing to check
		return p
	case t.Implements(marshalerType):
		p.kind, p.raw = pkMarshaler, true
		return p
	case t.Implements(textMarshalerType):
		p.kind, p.check = pkText, true
		return p
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(marshalerType):
		p.addr, p.raw = pkMarshaler, true
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(textMarshalerType):
		p.addr, p.check = pkText, true
	}
	switch t.Kind() {
	case reflect.String:
		p.kind, p.check = pkString, true
	case reflect.Float32, reflect.Float64:
		p.kind = pkFloat
	case reflect.Struct:
		p.kind = pkStruct
		p.fields = b.fields(t)
	case reflect.Pointer:
		p.kind, p.elem = pkPointer, b.plan(t.Elem())
	case reflect.Slice:
		if e := reflect.PointerTo(t.Elem()); t.Elem().Kind() == reflect.Uint8 && !e.Implements(marshalerType) && !e.Implements(textMarshalerType) {
			break // []byte: base64, binary
		}
		p.kind, p.elem = pkList, b.plan(t.Elem())
	case reflect.Array:
		p.kind, p.elem = pkList, b.plan(t.Elem())
	case reflect.Map:
		p.kind, p.elem = pkMap, b.plan(t.Elem())
		switch {
		case t.Key().Kind() == reflect.String:
			p.key, p.check = pkString, true
		case t.Key().Implements(textMarshalerType):
			p.key, p.check = pkText, true
		}
	case reflect.Interface:
		p.kind, p.check, p.raw = pkInterface, true, true
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		p.kind = pkUnsupported
	}
	return p
}

// fields lists the fields of struct type t that encoding/json encodes.
func (b *planBuilder) fields(t reflect.Type) []planField {
	var fs []planField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if !f.IsExported() && ft.Kind() != reflect.Struct {
				continue
			}
			if name == "" && ft.Kind() == reflect.Struct {
				fs = append(fs, planField{index: i, plan: b.plan(f.Type)}) // promoted
				continue
			}
		} else if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs = append(fs, planField{index: i, name: name, plan: b.plan(f.Type)})
	}
	return fs
}

// cycleDepth is the nesting of pointers, slices and maps past which
// suspect watches for cycles, as encoding/json does (which refuses them).
const cycleDepth = 1000

// suspect reports whether json would change something in v silently: a
// string or map key that is not valid UTF-8, or such a text from a
// TextMarshaler. It allocates nothing for plain data.
func (p *valuePlan) suspect(v reflect.Value, depth int) bool {
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
		q := planOf(e.Type())
		return q.check && q.suspect(e, depth)
	}
	return false
}

func (p *valuePlan) suspectStruct(v reflect.Value, depth int) bool {
	for i := range p.fields {
		f := &p.fields[i]
		if f.plan.check && f.plan.suspect(v.Field(f.index), depth) {
			return true
		}
	}
	return false
}

func (p *valuePlan) suspectPointer(v reflect.Value, depth int) bool {
	if v.IsNil() || !p.elem.check {
		return false
	}
	if depth++; depth > cycleDepth {
		return p.suspectDeep(v, depth, seenKey{v.UnsafePointer(), 0})
	}
	return p.elem.suspect(v.Elem(), depth)
}

func (p *valuePlan) suspectList(v reflect.Value, depth int) bool {
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

func (p *valuePlan) suspectMap(v reflect.Value, depth int) bool {
	if v.CanInterface() {
		switch m := v.Interface().(type) {
		case map[string]string:
			for k, s := range m {
				if !utf8.ValidString(k) || !utf8.ValidString(s) {
					return true
				}
			}
			return false
		case map[string]any:
			for k, e := range m {
				if !utf8.ValidString(k) {
					return true
				}
				if e != nil {
					ev := reflect.ValueOf(e)
					if q := planOf(ev.Type()); q.check && q.suspect(ev, depth) {
						return true
					}
				}
			}
			return false
		}
	}
	for it := v.MapRange(); it.Next(); {
		switch p.key {
		case pkString:
			if !utf8.ValidString(it.Key().String()) {
				return true
			}
		case pkText:
			if textSuspect(it.Key()) {
				return true
			}
		}
		if p.elem.check && p.elem.suspect(it.Value(), depth) {
			return true
		}
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
func (p *valuePlan) suspectDeep(v reflect.Value, depth int, k seenKey) bool {
	return p.deep(v, depth, k, seenPath{})
}

// deep walks the pointer, slice or map v with key k, unless it is already
// on the path (a cycle).
func (p *valuePlan) deep(v reflect.Value, depth int, k seenKey, seen seenPath) bool {
	if seen[k] {
		return false
	}
	seen[k] = true
	defer delete(seen, k)
	switch p.kind {
	case pkPointer:
		return p.elem.suspectSeen(v.Elem(), depth, seen)
	case pkList:
		for i := range v.Len() {
			if p.elem.suspectSeen(v.Index(i), depth, seen) {
				return true
			}
		}
	case pkMap:
		for it := v.MapRange(); it.Next(); {
			if p.key == pkString && !utf8.ValidString(it.Key().String()) || p.key == pkText && textSuspect(it.Key()) {
				return true
			}
			if p.elem.suspectSeen(it.Value(), depth, seen) {
				return true
			}
		}
	}
	return false
}

// suspectSeen is suspect below cycleDepth, where every pointer, slice and
// map goes through deep.
func (p *valuePlan) suspectSeen(v reflect.Value, depth int, seen seenPath) bool {
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
			if f.plan.suspectSeen(v.Field(f.index), depth, seen) {
				return true
			}
		}
		return false
	case pkPointer, pkMap:
		if v.IsNil() {
			return false
		}
		return p.deep(v, depth+1, seenKey{v.UnsafePointer(), 0}, seen)
	case pkList:
		if v.Kind() == reflect.Slice {
			if v.IsNil() {
				return false
			}
			return p.deep(v, depth+1, seenKey{v.UnsafePointer(), v.Len()}, seen)
		}
		for i := range v.Len() { // an array holds no cycle of its own
			if p.elem.suspectSeen(v.Index(i), depth, seen) {
				return true
			}
		}
		return false
	case pkInterface:
		if v.IsNil() {
			return false
		}
		e := v.Elem()
		return planOf(e.Type()).suspectSeen(e, depth, seen)
	}
	return p.suspect(v, depth)
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

// locate names the first value in v that json would change or refuse. It
// runs only after something was found, and may allocate.
func (p *valuePlan) locate(v reflect.Value, depth int) *InvalidValueError {
	if depth > 2*cycleDepth {
		return nil // most likely a cycle: json says so
	}
	if p.addr != pkOther && v.CanAddr() {
		return marshalerProblem(v.Addr(), p.addr)
	}
	switch p.kind {
	case pkString:
		if s := v.String(); !utf8.ValidString(s) {
			return &InvalidValueError{Reason: "string is not valid UTF-8" + badByte([]byte(s))}
		}
	case pkFloat:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return &InvalidValueError{Reason: fmt.Sprintf("%v cannot be stored as JSON", f)}
		}
	case pkMarshaler, pkText:
		return marshalerProblem(v, p.kind)
	case pkUnsupported:
		return &InvalidValueError{Reason: fmt.Sprintf("JSON cannot hold a %s", v.Type())}
	case pkStruct:
		for _, f := range p.fields {
			if e := f.plan.locate(v.Field(f.index), depth); e != nil {
				e.Field = joinPath(f.name, e.Field)
				return e
			}
		}
	case pkPointer:
		if !v.IsNil() {
			return p.elem.locate(v.Elem(), depth+1)
		}
	case pkList:
		for i := range v.Len() {
			if e := p.elem.locate(v.Index(i), depth+1); e != nil {
				e.Field = joinPath(fmt.Sprintf("[%d]", i), e.Field)
				return e
			}
		}
	case pkMap:
		return p.locateMap(v, depth)
	case pkInterface:
		if !v.IsNil() {
			e := v.Elem()
			return planOf(e.Type()).locate(e, depth+1)
		}
	}
	return nil
}

// marshalerProblem calls the MarshalJSON (kind pkMarshaler) or MarshalText
// (pkText) of v and reports an error or output that is not valid UTF-8.
// locateMap finds the first invalid key or value of map v.
func (p *valuePlan) locateMap(v reflect.Value, depth int) *InvalidValueError {
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
func (p *valuePlan) mapKeyName(k reflect.Value) (string, *InvalidValueError) {
	switch p.key {
	case pkString:
		name := k.String()
		if !utf8.ValidString(name) {
			return "", &InvalidValueError{Reason: "map key is not valid UTF-8" + badByte([]byte(name))}
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

func marshalerProblem(v reflect.Value, kind planKind) *InvalidValueError {
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
		return &InvalidValueError{Reason: err.Error()}
	case !utf8.Valid(out) && kind == pkMarshaler:
		return &InvalidValueError{Reason: fmt.Sprintf("the MarshalJSON of %s wrote invalid UTF-8%s", v.Type(), badByte(out))}
	case !utf8.Valid(out):
		return &InvalidValueError{Reason: fmt.Sprintf("the text of %s is not valid UTF-8%s", v.Type(), badByte(out))}
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

// joinPath puts segment seg (a JSON name, "[i]" or "" for a promoted
// struct) in front of path rest.
func joinPath(seg, rest string) string {
	switch {
	case rest == "":
		return seg
	case seg == "":
		return rest
	case rest[0] == '[':
		return seg + rest
	}
	return seg + "." + rest
}
