package fields

// The JSON codec's check of what encoding/json would change silently
// (strings that are not valid UTF-8) or refuse without naming the field
// (NaN, ±Inf): a walk of the value planned once per type. This file
// builds the plans; suspect.go walks a value for anything json would
// change, locate.go names the first value json would change or refuse.

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

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

// Plan is what the JSON check looks at in a value of one type. Plans are
// built once per type and shared; they may form cycles (recursive types).
type Plan struct {
	typ  reflect.Type
	kind planKind
	// addr is pkMarshaler or pkText when only *T has the method: json uses
	// it for addressable values.
	addr   planKind
	key    planKind // a map's keys: pkString, pkText or pkOther
	check  bool     // a value may hold something json would change silently
	raw    bool     // a value may hold a json.Marshaler, whose output is checked
	elem   *Plan
	fields []planField
}

// planField is a field json stores (by Of), and the plan of its type.
type planField struct {
	Field
	plan *Plan
}

var (
	planCache         sync.Map // reflect.Type -> *Plan, complete plans only
	planMu            sync.Mutex
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
)

// lastPlan is the plan PlanOf returned last: most programs encode one
// document type far more than others.
var lastPlan atomic.Pointer[Plan]

// PlanOf returns the plan of type t.
func PlanOf(t reflect.Type) *Plan {
	if p := lastPlan.Load(); p != nil && p.typ == t {
		return p
	}
	if p, ok := planCache.Load(t); ok {
		lastPlan.Store(p.(*Plan))
		return p.(*Plan)
	}
	planMu.Lock()
	defer planMu.Unlock()
	b := planBuilder{made: map[reflect.Type]*Plan{}}
	p := b.plan(t)
	b.spread()
	for t, q := range b.made {
		planCache.Store(t, q)
	}
	return p
}

// Raw reports whether a value of the plan's type may hold a
// json.Marshaler, whose output the caller checks.
func (p *Plan) Raw() bool { return p.raw }

type planBuilder struct{ made map[reflect.Type]*Plan }

// spread makes check and raw spread from elements to what holds them,
// around cycles too.
func (b *planBuilder) spread() {
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
}

func (b *planBuilder) plan(t reflect.Type) *Plan {
	if p, ok := planCache.Load(t); ok {
		return p.(*Plan)
	}
	if p, ok := b.made[t]; ok {
		return p
	}
	p := &Plan{typ: t}
	b.made[t] = p
	if b.marshaler(p) {
		return p
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
	case reflect.Slice, reflect.Array:
		b.list(p)
	case reflect.Map:
		b.mapPlan(p)
	case reflect.Interface:
		p.kind, p.check, p.raw = pkInterface, true, true
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		p.kind = pkUnsupported
	}
	return p
}

// marshaler plans a type with a MarshalJSON or MarshalText method, and
// reports whether that is all there is to plan (the method is the value's
// own, not only its pointer's).
func (b *planBuilder) marshaler(p *Plan) bool {
	t := p.typ
	switch {
	case t == timeType:
		p.kind = pkMarshaler // writes ASCII or refuses: nothing to check
		return true
	case t.Implements(marshalerType):
		p.kind, p.raw = pkMarshaler, true
		return true
	case t.Implements(textMarshalerType):
		p.kind, p.check = pkText, true
		return true
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(marshalerType):
		p.addr, p.raw = pkMarshaler, true
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(textMarshalerType):
		p.addr, p.check = pkText, true
	}
	return false
}

// list plans a slice or array; []byte is base64, binary: nothing to check.
func (b *planBuilder) list(p *Plan) {
	t := p.typ
	if e := reflect.PointerTo(t.Elem()); t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 && !e.Implements(marshalerType) && !e.Implements(textMarshalerType) {
		return
	}
	p.kind, p.elem = pkList, b.plan(t.Elem())
}

func (b *planBuilder) mapPlan(p *Plan) {
	t := p.typ
	p.kind, p.elem = pkMap, b.plan(t.Elem())
	switch {
	case t.Key().Kind() == reflect.String:
		p.key, p.check = pkString, true
	case t.Key().Implements(textMarshalerType):
		p.key, p.check = pkText, true
	}
}

// fields plans the fields of struct type t that encoding/json encodes.
func (b *planBuilder) fields(t reflect.Type) []planField {
	of := Of(t).Fields
	fs := make([]planField, len(of))
	for i, f := range of {
		fs[i] = planField{Field: f, plan: b.plan(f.Type)}
	}
	return fs
}
