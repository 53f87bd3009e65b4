package etagstore

import "testing"

// TestResolve checks the outcome resolver row by row: what a read made
// after a lost answer says of each kind of write.
func TestResolve(t *testing.T) {
	// The version an update was conditioned on: lineage L, seq 5, window
	// of 3 ids.
	base := meta{ids: "a,b,c", lineage: "L", seq: 5}
	upd := sentWrite{w: Write{Cond: IfMatch(`"e5"`)}, meta: base.then("mine", 3, 0)} // seq 6
	create := sentWrite{w: Write{Cond: Cond{Kind: CondCreate}}, meta: fresh("mine", 0)}
	replace := sentWrite{w: Write{Cond: IfMatch(`"e5"`)}, meta: fresh("mine", 0)}
	replaceAny := sentWrite{w: Write{Cond: IfMatch(ETagAny)}, meta: fresh("mine", 0)}
	upsert := sentWrite{w: Write{Cond: Cond{Kind: CondNone}}, meta: fresh("mine", 0)}
	del := sentWrite{del: true, w: Write{Cond: IfMatch(`"e5"`)}}
	delAny := sentWrite{del: true, w: Write{Cond: IfMatch(ETagAny)}}

	at := func(etag ETag, m meta) observed { return observed{found: true, etag: etag, meta: m} }
	gone := observed{}
	// Later versions of L: seq 7 after an update by another writer.
	other6 := base.then("x6", 3, 0)
	other7 := other6.then("x7", 3, 0)
	mine6 := upd.meta
	after := mine6.then("y7", 3, 0)
	// A writer keeping one id only wrote seq 6 and 7: slot 6 left the window.
	narrow := meta{ids: "z7", lineage: "L", seq: 7}
	cut := fresh("someone", 0) // a history started by another Replace/Upsert/Create

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
		{"create: it, then updated", create, at(`"e2"`, create.meta.then("u", 16, 0)), committed},
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

// TestMetaThen: an update's bookkeeping keeps the newest ids, continues the
// lineage and the highest fence, and round-trips through its encoding.
func TestMetaThen(t *testing.T) {
	m := parseMeta("w=a,b,c;l=L;n=5;f=3")
	for _, tc := range []struct {
		keep  int
		fence int64
		want  string
	}{
		{16, 0, "w=a,b,c,x;l=L;n=6;f=3"},
		{3, 0, "w=b,c,x;l=L;n=6;f=3"},
		{1, 7, "w=x;l=L;n=6;f=7"},
	} {
		next := m.then("x", tc.keep, tc.fence)
		if got := next.String(); got != tc.want {
			t.Errorf("then(x, %d, %d) = %q, want %q", tc.keep, tc.fence, got, tc.want)
		}
		if again := parseMeta(next.String()); again.ids != next.ids || again.seq != next.seq || again.lineage != next.lineage || again.fence != next.fence {
			t.Errorf("%q does not round-trip: %+v vs %+v", next.String(), again, next)
		}
		if next.lastID() != "x" || !next.has("x") || next.has("y") {
			t.Errorf("then(x): lastID %q, has(x) %v", next.lastID(), next.has("x"))
		}
	}
	if gen := m.then("", 16, 0); len(gen.lastID()) != 16 || gen.has("a") == false {
		t.Errorf("then with a generated id = %q", gen.String())
	}
}
