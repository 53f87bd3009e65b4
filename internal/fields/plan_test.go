package fields

import (
	"reflect"
	"testing"
)

// TestPlanWalksTheFieldsJSONWrites: a field promoted through an embedded
// pointer is checked (and a nil one skipped); a field json does not write,
// hidden by a shallower one of the same name, is not.
func TestPlanWalksTheFieldsJSONWrites(t *testing.T) {
	const bad = "a\xffb"
	check := func(v any, wantField string, wantFound bool) {
		t.Helper()
		rv := reflect.ValueOf(v)
		p := PlanOf(rv.Type())
		if got := p.Suspect(rv); got != wantFound {
			t.Fatalf("%#v: Suspect = %v, want %v", v, got, wantFound)
		}
		if !wantFound {
			return
		}
		pr := p.Locate(rv)
		if pr == nil || pr.Field != wantField {
			t.Fatalf("%#v: Locate = %+v, want field %q", v, pr, wantField)
		}
	}
	check(pointerEmbed{Base: &Base{B: bad}}, "B", true)
	check(pointerEmbed{S: "ok"}, "", false)
	check(shallowWins{Base: Base{B: bad}}, "", false) // json writes shallowWins.B, not Base.B
	check(shallowWins{B: bad}, "B", true)
	check(taggedEmbed{Base{A: bad}}, "base.A", true)
	check(cycle{Cycle{Z: bad}}, "Z", true)
}
