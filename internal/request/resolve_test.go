package request

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/outcome"
)

// TestResolve checks the outcome resolver row by row: what a read made
// after a lost answer says of each kind of write.
func TestResolve(t *testing.T) {
	// The version an update was conditioned on: lineage L, seq 5, window
	// of 3 ids.
	base := meta.Meta{IDs: "a,b,c", Lineage: "L", Seq: 5}
	upd := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"e5"`)}}, Meta: base.Then("mine", 3, 0)} // seq 6
	create := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.Cond{Kind: driver.CondCreate}}}, Meta: meta.Fresh("mine", 0)}
	replace := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"e5"`)}}, Meta: meta.Fresh("mine", 0)}
	replaceAny := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(driver.ETagAny)}}, Meta: meta.Fresh("mine", 0)}
	upsert := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.Cond{Kind: driver.CondNone}}}, Meta: meta.Fresh("mine", 0)}
	del := KeyWrite{Action: driver.Action{Delete: true, Write: driver.Write{Cond: driver.IfMatch(`"e5"`)}}}
	delAny := KeyWrite{Action: driver.Action{Delete: true, Write: driver.Write{Cond: driver.IfMatch(driver.ETagAny)}}}

	at := func(etag driver.ETag, m meta.Meta) Version {
		return Version{Item: driver.Item{ETag: etag}, Meta: m, Exists: true}
	}
	gone := Version{}
	// Later versions of L: seq 7 after an update by another writer.
	other6 := base.Then("x6", 3, 0)
	other7 := other6.Then("x7", 3, 0)
	mine6 := upd.Meta
	after := mine6.Then("y7", 3, 0)
	// A writer keeping one id only wrote seq 6 and 7: slot 6 left the window.
	narrow := meta.Meta{IDs: "z7", Lineage: "L", Seq: 7}
	cut := meta.Fresh("someone", 0) // a history started by another Replace/Upsert/Create

	for _, tc := range []struct {
		name string
		w    KeyWrite
		o    Version
		want outcome.Verdict
	}{
		{"update: stored version is it", upd, at(`"e6"`, mine6), outcome.Committed},
		{"update: it, then later writes", upd, at(`"e7"`, after), outcome.Committed},
		{"update: base still current", upd, at(`"e5"`, base), outcome.NotLanded},
		{"update: another write took its slot", upd, at(`"e6"`, other6), outcome.NotApplied},
		{"update: another write took its slot, more followed", upd, at(`"e7"`, other7), outcome.NotApplied},
		{"update: base changed without a write (merge)", upd, at(`"e5m"`, base), outcome.NotApplied},
		{"update: its slot left the document's window", upd, at(`"e7"`, narrow), outcome.Unknown},
		{"update: history cut", upd, at(`"e9"`, cut), outcome.Unknown},
		{"update: deleted", upd, gone, outcome.Unknown},

		{"create: it", create, at(`"e1"`, create.Meta), outcome.Committed},
		{"create: it, then updated", create, at(`"e2"`, create.Meta.Then("u", 16, 0)), outcome.Committed},
		{"create: missing", create, gone, outcome.Unknown},
		{"create: another history", create, at(`"e1"`, cut), outcome.Unknown},

		{"replace: it", replace, at(`"e6"`, replace.Meta), outcome.Committed},
		{"replace: base still current", replace, at(`"e5"`, base), outcome.NotLanded},
		{"replace: another version", replace, at(`"e6"`, other6), outcome.Unknown},
		{"replace: deleted", replace, gone, outcome.Unknown},
		{"replace *: it", replaceAny, at(`"e6"`, replaceAny.Meta), outcome.Committed},
		{"replace *: another version", replaceAny, at(`"e5"`, base), outcome.Unknown},
		{"upsert: it", upsert, at(`"e6"`, upsert.Meta), outcome.Committed},
		{"upsert: another version", upsert, at(`"e5"`, base), outcome.Unknown},
		{"upsert: missing", upsert, gone, outcome.Unknown},

		{"delete: the version it names is there", del, at(`"e5"`, base), outcome.NotLanded},
		{"delete: gone", del, gone, outcome.Unknown},
		{"delete: another version", del, at(`"e6"`, other6), outcome.Unknown},
		{"delete *: gone", delAny, gone, outcome.Unknown},
		{"delete *: a version", delAny, at(`"e5"`, base), outcome.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(Request{tc.w}, []Version{tc.o}); got != tc.want {
				t.Errorf("resolve = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestResolveAtomicRequest: a request of several keys is applied all or
// nothing, so the first key whose read tells decides for all.
func TestResolveAtomicRequest(t *testing.T) {
	base := meta.Meta{IDs: "a", Lineage: "L", Seq: 1}
	mine := base.Then("mine", 16, 0)
	upd := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"e1"`)}}, Meta: mine}
	merge := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"m1"`), Mode: driver.ModeMerge}}}
	at := func(etag driver.ETag, m meta.Meta) Version {
		return Version{Item: driver.Item{ETag: etag}, Meta: m, Exists: true}
	}
	for _, tc := range []struct {
		name string
		o    []Version
		want outcome.Verdict
	}{
		{"the merge's key tells nothing, the update's is committed", []Version{at(`"m2"`, meta.Meta{}), at(`"e2"`, mine)}, outcome.Committed},
		{"the merge's key still at its version: not landed", []Version{at(`"m1"`, meta.Meta{}), at(`"e1"`, base)}, outcome.NotLanded},
		{"the update's slot taken by another write", []Version{at(`"m2"`, meta.Meta{}), at(`"e2"`, base.Then("x", 16, 0))}, outcome.NotApplied},
		{"nothing tells", []Version{at(`"m2"`, meta.Meta{}), {}}, outcome.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(Request{merge, upd}, tc.o); got != tc.want {
				t.Errorf("resolve = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestResolveNotLandedButUnlandable: a request not landed (a key still at
// the version it was conditioned on) whose other condition no longer holds
// — a checked key that moved on, a created key that exists — is refused on
// every resend: it is not applied, and built again, never sent forever.
func TestResolveNotLandedButUnlandable(t *testing.T) {
	base := meta.Meta{IDs: "a", Lineage: "L", Seq: 1}
	upd := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"e1"`)}}, Meta: base.Then("mine", 16, 0)}
	check := Check(Version{Item: driver.Item{ETag: `"c1"`}, Exists: true})
	create := KeyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.Cond{Kind: driver.CondCreate}}}, Meta: meta.Fresh("mine", 0)}
	at := func(etag driver.ETag, m meta.Meta) Version {
		return Version{Item: driver.Item{ETag: etag}, Meta: m, Exists: true}
	}
	for _, tc := range []struct {
		name string
		req  Request
		o    []Version
		want outcome.Verdict
	}{
		{"the checked key unchanged: not landed", Request{upd, check}, []Version{at(`"e1"`, base), at(`"c1"`, meta.Meta{})}, outcome.NotLanded},
		{"the checked key moved on", Request{upd, check}, []Version{at(`"e1"`, base), at(`"c2"`, meta.Meta{})}, outcome.NotApplied},
		{"the checked key gone", Request{upd, check}, []Version{at(`"e1"`, base), {}}, outcome.NotApplied},
		{"the created key created by another", Request{upd, create}, []Version{at(`"e1"`, base), at(`"x"`, meta.Fresh("other", 0))}, outcome.NotApplied},
		{"the created key still missing", Request{upd, create}, []Version{at(`"e1"`, base), {}}, outcome.NotLanded},
		{"committed wins over a moved check", Request{upd, check}, []Version{at(`"e2"`, base.Then("mine", 16, 0)), at(`"c2"`, meta.Meta{})}, outcome.Committed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(tc.req, tc.o); got != tc.want {
				t.Errorf("resolve = %v, want %v", got, tc.want)
			}
		})
	}
}
