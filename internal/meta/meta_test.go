package meta

import (
	"strconv"
	"strings"
	"testing"

	"github.com/etagstore/etagstore/driver"
)

// TestMetaThen: an update's bookkeeping keeps the newest ids, continues the
// lineage and the highest fence, and round-trips through its encoding.
func TestMetaThen(t *testing.T) {
	m := Parse("w=a,b,c;l=L;n=5;f=3")
	for _, tc := range []struct {
		keep  int
		fence int64
		want  string
	}{
		{16, 0, "w=a,b,c,x;l=L;n=6;f=3"},
		{3, 0, "w=b,c,x;l=L;n=6;f=3"},
		{1, 7, "w=x;l=L;n=6;f=7"},
	} {
		next := m.Then("x", tc.keep, tc.fence)
		if got := next.String(); got != tc.want {
			t.Errorf("then(x, %d, %d) = %q, want %q", tc.keep, tc.fence, got, tc.want)
		}
		if again := Parse(next.String()); again.IDs != next.IDs || again.Seq != next.Seq || again.Lineage != next.Lineage || again.Fence != next.Fence {
			t.Errorf("%q does not round-trip: %+v vs %+v", next.String(), again, next)
		}
		if next.LastID() != "x" || !next.Has("x") || next.Has("y") {
			t.Errorf("then(x): lastID %q, has(x) %v", next.LastID(), next.Has("x"))
		}
	}
	if gen := m.Then("", 16, 0); len(gen.LastID()) != 16 || gen.Has("a") == false {
		t.Errorf("then with a generated id = %q", gen.String())
	}
	// Every field of Then's result is what Parse reads from its encoding,
	// with and without a fence, ids and a generated id.
	for _, from := range []string{"l=L;n=1", "w=a;l=L;n=41", "w=a,b;l=L;n=2;f=9"} {
		for _, id := range []string{"x", ""} {
			next := Parse(from).Then(id, 2, 0)
			again := Parse(next.String())
			again.raw = next.raw
			if again != next {
				t.Errorf("Parse(%q).Then(%q) = %+v, its encoding parses as %+v", from, id, next, again)
			}
		}
	}
}

// sixteen is the bookkeeping of a document after many writes with the
// default window of 16 ids.
func sixteen() Meta {
	m := Fresh(NewID(), 0)
	for range 20 {
		m = m.Then("", 16, 0)
	}
	return m
}

// BenchmarkThen: the bookkeeping of one Update's write.
func BenchmarkThen(b *testing.B) {
	m := sixteen()
	b.ReportAllocs()
	for b.Loop() {
		_ = m.Then("", 16, 0)
	}
}

// BenchmarkParse: reading the bookkeeping of a version read.
func BenchmarkParse(b *testing.B) {
	s := sixteen().String()
	b.ReportAllocs()
	for b.Loop() {
		_ = Parse(s)
	}
}

// Then sizes its buffer exactly: thenLen is the length of what it builds,
// for every number of ids kept, sequence number and fencing token.
func TestThenLen(t *testing.T) {
	m := Fresh(NewID(), 0)
	for i := range 40 {
		for j, fence := range []int64{0, 7, 1 << 40} {
			n := m.Then("", 16>>(j*4), fence) // keeping 16, 1 and no old ids
			old := n.IDs[:max(len(n.IDs)-idLen-1, 0)]
			if got, want := thenLen(len(old), idLen, len(n.Lineage), n.Seq, n.Fence), len(n.String()); got != want {
				t.Fatalf("after %d writes, fence %d: thenLen %d, encoding %d (%q)", i, fence, got, want, n.String())
			}
		}
		m = m.Then("", 16, 0)
		m.Seq += int64(i) * 997 // every number of digits
	}
	for _, n := range []int64{0, 9, 10, 99, 100, -1, -10, 1<<63 - 1} {
		if got, want := digits(n), len(strconv.FormatInt(n, 10)); got != want {
			t.Errorf("digits(%d) = %d, want %d", n, got, want)
		}
	}
}

// A write marked as ending a Store's turn carries y=<the Store's name>,
// whether its encoding was built by Then or by String; Parse reads it
// back, older fields unchanged; marking again names the last Store; the
// next write's bookkeeping drops it; and a field Parse does not know is
// skipped (older readers ignore y the same way).
func TestYield(t *testing.T) {
	for _, m := range []Meta{Parse("w=a;l=L;n=4").Then("x", 16, 2), Parse("w=a;l=L;n=4")} {
		y := m.Yielding("s1")
		again := Parse(y.String())
		if again.Yield != "s1" || again.IDs != m.IDs || again.Lineage != m.Lineage || again.Seq != m.Seq || again.Fence != m.Fence {
			t.Errorf("%q yielding = %q, parsed %+v", m.String(), y.String(), again)
		}
		if y2 := y.Yielding("s2"); Parse(y2.String()).Yield != "s2" || strings.Count(y2.String(), "y=") != 1 {
			t.Errorf("yielding twice: %q", y2.String())
		}
		if next := again.Then("z", 16, 0); next.Yield != "" || next.String() != Parse(m.String()).Then("z", 16, 0).String() {
			t.Errorf("the write after a yielding one: %q", next.String())
		}
	}
	if m := Parse("w=a;q=7;l=L;n=4"); m.IDs != "a" || m.Lineage != "L" || m.Seq != 4 || m.Yield != "" {
		t.Errorf("an unknown field: parsed %+v", m)
	}
}

// TestFenceOfReadsTheToken: driver.FenceOf, which backends use to keep
// a deleted key's token, reads the token this package writes.
func TestFenceOfReadsTheToken(t *testing.T) {
	for _, m := range []Meta{{}, Fresh("a", 0), Fresh("a", 7), Fresh("a", 1<<40).Then("b", 3, 9), Fresh("a", 5).Yielding("s")} {
		if got, want := driver.FenceOf(m.String()), m.Fence; got != want {
			t.Errorf("FenceOf(%q) = %d, want %d", m.String(), got, want)
		}
	}
}
