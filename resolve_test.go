package etagstore

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/meta"
)

// TestResolve checks the outcome resolver row by row: what a read made
// after a lost answer says of each kind of write.
func TestResolve(t *testing.T) {
	// The version an update was conditioned on: lineage L, seq 5, window
	// of 3 ids.
	base := meta.Meta{IDs: "a,b,c", Lineage: "L", Seq: 5}
	upd := keyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"e5"`)}}, meta: base.Then("mine", 3, 0)} // seq 6
	create := keyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.Cond{Kind: driver.CondCreate}}}, meta: meta.Fresh("mine", 0)}
	replace := keyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"e5"`)}}, meta: meta.Fresh("mine", 0)}
	replaceAny := keyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(ETagAny)}}, meta: meta.Fresh("mine", 0)}
	upsert := keyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.Cond{Kind: driver.CondNone}}}, meta: meta.Fresh("mine", 0)}
	del := keyWrite{Action: driver.Action{Delete: true, Write: driver.Write{Cond: driver.IfMatch(`"e5"`)}}}
	delAny := keyWrite{Action: driver.Action{Delete: true, Write: driver.Write{Cond: driver.IfMatch(ETagAny)}}}

	at := func(etag ETag, m meta.Meta) version {
		return version{Item: driver.Item{ETag: etag}, meta: m, exists: true}
	}
	gone := version{}
	// Later versions of L: seq 7 after an update by another writer.
	other6 := base.Then("x6", 3, 0)
	other7 := other6.Then("x7", 3, 0)
	mine6 := upd.meta
	after := mine6.Then("y7", 3, 0)
	// A writer keeping one id only wrote seq 6 and 7: slot 6 left the window.
	narrow := meta.Meta{IDs: "z7", Lineage: "L", Seq: 7}
	cut := meta.Fresh("someone", 0) // a history started by another Replace/Upsert/Create

	for _, tc := range []struct {
		name string
		w    keyWrite
		o    version
		want verdict
	}{
		{"update: stored version is it", upd, at(`"e6"`, mine6), committed},
		{"update: it, then later writes", upd, at(`"e7"`, after), committed},
		{"update: base still current", upd, at(`"e5"`, base), notLanded},
		{"update: another write took its slot", upd, at(`"e6"`, other6), notApplied},
		{"update: another write took its slot, more followed", upd, at(`"e7"`, other7), notApplied},
		{"update: base changed without a write (merge)", upd, at(`"e5m"`, base), notApplied},
		{"update: its slot left the document's window", upd, at(`"e7"`, narrow), unknown},
		{"update: history cut", upd, at(`"e9"`, cut), unknown},
		{"update: deleted", upd, gone, unknown},

		{"create: it", create, at(`"e1"`, create.meta), committed},
		{"create: it, then updated", create, at(`"e2"`, create.meta.Then("u", 16, 0)), committed},
		{"create: missing", create, gone, unknown},
		{"create: another history", create, at(`"e1"`, cut), unknown},

		{"replace: it", replace, at(`"e6"`, replace.meta), committed},
		{"replace: base still current", replace, at(`"e5"`, base), notLanded},
		{"replace: another version", replace, at(`"e6"`, other6), unknown},
		{"replace: deleted", replace, gone, unknown},
		{"replace *: it", replaceAny, at(`"e6"`, replaceAny.meta), committed},
		{"replace *: another version", replaceAny, at(`"e5"`, base), unknown},
		{"upsert: it", upsert, at(`"e6"`, upsert.meta), committed},
		{"upsert: another version", upsert, at(`"e5"`, base), unknown},
		{"upsert: missing", upsert, gone, unknown},

		{"delete: the version it names is there", del, at(`"e5"`, base), notLanded},
		{"delete: gone", del, gone, unknown},
		{"delete: another version", del, at(`"e6"`, other6), unknown},
		{"delete *: gone", delAny, gone, unknown},
		{"delete *: a version", delAny, at(`"e5"`, base), unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveRequest(request{tc.w}, []version{tc.o}); got != tc.want {
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
	upd := keyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"e1"`)}}, meta: mine}
	merge := keyWrite{Action: driver.Action{Write: driver.Write{Cond: driver.IfMatch(`"m1"`), Mode: driver.ModeMerge}}}
	at := func(etag ETag, m meta.Meta) version {
		return version{Item: driver.Item{ETag: etag}, meta: m, exists: true}
	}
	for _, tc := range []struct {
		name string
		o    []version
		want verdict
	}{
		{"the merge's key tells nothing, the update's is committed", []version{at(`"m2"`, meta.Meta{}), at(`"e2"`, mine)}, committed},
		{"the merge's key still at its version: not landed", []version{at(`"m1"`, meta.Meta{}), at(`"e1"`, base)}, notLanded},
		{"the update's slot taken by another write", []version{at(`"m2"`, meta.Meta{}), at(`"e2"`, base.Then("x", 16, 0))}, notApplied},
		{"nothing tells", []version{at(`"m2"`, meta.Meta{}), {}}, unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveRequest(request{merge, upd}, tc.o); got != tc.want {
				t.Errorf("resolveRequest = %v, want %v", got, tc.want)
			}
		})
	}
}
