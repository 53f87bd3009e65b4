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
	upd := sentWrite{w: driver.Write{Cond: driver.IfMatch(`"e5"`)}, meta: base.Then("mine", 3, 0)} // seq 6
	create := sentWrite{w: driver.Write{Cond: driver.Cond{Kind: driver.CondCreate}}, meta: meta.Fresh("mine", 0)}
	replace := sentWrite{w: driver.Write{Cond: driver.IfMatch(`"e5"`)}, meta: meta.Fresh("mine", 0)}
	replaceAny := sentWrite{w: driver.Write{Cond: driver.IfMatch(ETagAny)}, meta: meta.Fresh("mine", 0)}
	upsert := sentWrite{w: driver.Write{Cond: driver.Cond{Kind: driver.CondNone}}, meta: meta.Fresh("mine", 0)}
	del := sentWrite{del: true, w: driver.Write{Cond: driver.IfMatch(`"e5"`)}}
	delAny := sentWrite{del: true, w: driver.Write{Cond: driver.IfMatch(ETagAny)}}

	at := func(etag ETag, m meta.Meta) observed { return observed{Found: true, ETag: string(etag), Meta: m} }
	gone := observed{}
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
		w    sentWrite
		o    observed
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
			if got := resolve(tc.w, tc.o); got != tc.want {
				t.Errorf("resolve = %v, want %v", got, tc.want)
			}
		})
	}
}
