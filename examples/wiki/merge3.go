package main

import (
	"slices"
	"strings"
)

// maxMergeLines bounds the line-diff's quadratic table; longer texts are
// not merged automatically (every concurrent edit is then a conflict).
const maxMergeLines = 3000

// hunk replaces base[start:end] with lines.
type hunk struct {
	start, end int
	lines      []string
}

// diffHunks returns the changes that turn base into other, from a longest
// common subsequence of lines.
func diffHunks(base, other []string) []hunk {
	n, m := len(base), len(other)
	// lcs[i][j] = LCS length of base[i:] and other[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if base[i] == other[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var hunks []hunk
	i, j := 0, 0
	si, sj := 0, 0 // start of the current unmatched stretch
	flush := func() {
		if si < i || sj < j {
			hunks = append(hunks, hunk{start: si, end: i, lines: other[sj:j]})
		}
	}
	for i < n && j < m {
		switch {
		case base[i] == other[j]:
			flush()
			i, j = i+1, j+1
			si, sj = i, j
		case lcs[i+1][j] >= lcs[i][j+1]:
			i++
		default:
			j++
		}
	}
	i, j = n, m
	flush()
	return hunks
}

// merge3 merges two edits of base line by line, diff3-style: a region
// changed on one side takes that side; changed on both sides to the same
// text takes it once; changed differently on both sides (or touching) is a
// conflict, written with markers. It returns the merged lines and the
// number of conflicts.
func merge3(base, mine, theirs []string) ([]string, int) {
	if len(base) > maxMergeLines || len(mine) > maxMergeLines || len(theirs) > maxMergeLines {
		if slices.Equal(mine, theirs) {
			return mine, 0
		}
		return conflictBlock(mine, theirs), 1
	}
	type side struct {
		hunk
		mine bool
	}
	var all []side
	for _, h := range diffHunks(base, mine) {
		all = append(all, side{h, true})
	}
	for _, h := range diffHunks(base, theirs) {
		all = append(all, side{h, false})
	}
	slices.SortStableFunc(all, func(a, b side) int { return a.start - b.start })

	var out []string
	conflicts := 0
	pos := 0
	for k := 0; k < len(all); {
		lo, hi := all[k].start, all[k].end
		group := []side{all[k]}
		for k++; k < len(all) && all[k].start <= hi; k++ { // overlapping or touching
			hi = max(hi, all[k].end)
			group = append(group, all[k])
		}
		out = append(out, base[pos:lo]...)
		apply := func(fromMine bool) ([]string, bool) {
			var res []string
			at, touched := lo, false
			for _, g := range group {
				if g.mine != fromMine {
					continue
				}
				touched = true
				res = append(res, base[at:g.start]...)
				res = append(res, g.lines...)
				at = g.end
			}
			return append(res, base[at:hi]...), touched
		}
		m, mt := apply(true)
		t, tt := apply(false)
		switch {
		case mt && !tt:
			out = append(out, m...)
		case tt && !mt:
			out = append(out, t...)
		case slices.Equal(m, t):
			out = append(out, m...)
		default:
			out = append(out, conflictBlock(m, t)...)
			conflicts++
		}
		pos = hi
	}
	return append(out, base[pos:]...), conflicts
}

// The lines conflictBlock puts around the two versions of a conflict. A
// save holding the first or the last is refused (see markerLines).
const (
	markerMine   = "<<<<<<< your edit"
	markerSep    = "======="
	markerTheirs = ">>>>>>> saved meanwhile"
)

func conflictBlock(mine, theirs []string) []string {
	out := []string{markerMine}
	out = append(out, mine...)
	out = append(out, markerSep)
	out = append(out, theirs...)
	return append(out, markerTheirs)
}

// lines splits text into lines, normalising CRLF (browsers send it).
func lines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// diffLines renders a line diff of a against b: "  " same, "- " only in a,
// "+ " only in b.
func diffLines(a, b []string) []string {
	var out []string
	pos := 0
	for _, h := range diffHunks(a, b) {
		for _, l := range a[pos:h.start] {
			out = append(out, "  "+l)
		}
		for _, l := range a[h.start:h.end] {
			out = append(out, "- "+l)
		}
		for _, l := range h.lines {
			out = append(out, "+ "+l)
		}
		pos = h.end
	}
	for _, l := range a[pos:] {
		out = append(out, "  "+l)
	}
	return out
}
