package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMerge3(t *testing.T) {
	base := "a\nb\nc\nd\ne\nf"
	for _, tc := range []struct {
		name, mine, theirs, want string
		conflicts                int
	}{
		{"disjoint", "A\nb\nc\nd\ne\nf", "a\nb\nc\nd\ne\nF", "A\nb\nc\nd\ne\nF", 0},
		{"insert and delete", "a\nb\nnew\nc\nd\ne\nf", "a\nb\nc\nd\nf", "a\nb\nnew\nc\nd\nf", 0},
		{"same change", "a\nB\nc\nd\ne\nf", "a\nB\nc\nd\ne\nf", "a\nB\nc\nd\ne\nf", 0},
		{"one side only", "a\nb\nc\nd\ne\nf\ng", base, "a\nb\nc\nd\ne\nf\ng", 0},
		{"overlap", "a\nmine\nc\nd\ne\nf", "a\ntheirs\nc\nd\ne\nf",
			"a\n<<<<<<< your edit\nmine\n=======\ntheirs\n>>>>>>> saved meanwhile\nc\nd\ne\nf", 1},
		{"appends at the end", base + "\nmine", base + "\ntheirs",
			base + "\n<<<<<<< your edit\nmine\n=======\ntheirs\n>>>>>>> saved meanwhile", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n := merge3(lines(base), lines(tc.mine), lines(tc.theirs))
			if diff := cmp.Diff(tc.want, strings.Join(got, "\n")); diff != "" || n != tc.conflicts {
				t.Errorf("merge3 (-want +got):\n%s\nconflicts %d, want %d", diff, n, tc.conflicts)
			}
		})
	}
}

func TestDiffLines(t *testing.T) {
	got := diffLines(lines("a\nb\nc"), lines("a\nB\nc\nd"))
	want := []string{"  a", "- b", "+ B", "  c", "+ d"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diffLines (-want +got):\n%s", diff)
	}
}
