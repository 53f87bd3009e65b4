package members

import (
	"bytes"
	"encoding/json"
)

// Merge applies a type's change to a stored JSON document: base is the
// type's encoding of stored (what it read), mine its encoding after the
// change. The result is stored with every value the type changed taken
// from mine and everything else as stored, byte for byte, at any depth:
// members the type does not know (a newer version's, another program's),
// members it did not change, and their order.
//
//   - A member is the type's when base has it by exact name, or else by
//     name folded (encoding/json's match, see Fold), so a stored "Title"
//     decoded into a field named "title" is replaced when the type
//     changes it, not kept beside it.
//   - A member mine leaves out (an omitempty field emptied, a map entry
//     deleted) is removed; one mine adds is appended, or written where a
//     stored member of its name stands.
//   - In an array the type changed, an element it left as it was keeps
//     its stored bytes wherever the type moved it; when the array's length
//     is unchanged an element changed in place keeps, in its turn, what
//     the type does not know inside it; other elements are written as mine
//     holds them.
//   - Where stored and base differ in shape (a value stored as a string
//     that the type encodes as an object, say), mine's value is written.
//
// Merge assumes its inputs are valid JSON (stored as the backend returned
// it; base and mine as the codec wrote them).
func Merge(stored, base, mine []byte) []byte {
	return merge(make([]byte, 0, len(stored)+len(mine)-len(base)+16), stored, base, mine)
}

func merge(dst, s, b, m []byte) []byte {
	s, b, m = bytes.TrimSpace(s), bytes.TrimSpace(b), bytes.TrimSpace(m)
	switch {
	case bytes.Equal(b, m):
		return append(dst, s...) // the type changed nothing here
	case bytes.Equal(s, b):
		return append(dst, m...) // nothing here beyond the type
	case len(s) > 0 && len(b) > 0 && len(m) > 0 && s[0] == '{' && b[0] == '{' && m[0] == '{':
		return mergeObject(dst, s, b, m)
	case len(s) > 0 && len(b) > 0 && len(m) > 0 && s[0] == '[' && b[0] == '[' && m[0] == '[':
		return mergeArray(dst, s, b, m)
	}
	return append(dst, m...)
}

// member is one member of an object: its name, decoded, and its value.
type member struct {
	name  string
	value []byte
	raw   []byte // name and value as they stand
}

func objectMembers(doc []byte) []member {
	var out []member
	each(doc, func(raw, name []byte) {
		i := SkipString(raw, 0)
		i = SkipSpace(raw, i)
		out = append(out, member{name: string(name), value: raw[SkipSpace(raw, i+1):], raw: raw})
	})
	return out
}

// index finds members by exact name, or else by folded name.
type index struct {
	exact  map[string]int
	folded map[string]int
}

func indexOf(ms []member) index {
	x := index{exact: make(map[string]int, len(ms)), folded: make(map[string]int, len(ms))}
	for i, m := range ms {
		if _, ok := x.exact[m.name]; !ok {
			x.exact[m.name] = i
		}
		if f := Fold(m.name); x.folded[f] == 0 {
			x.folded[f] = i + 1 // 0: none
		}
	}
	return x
}

func (x index) find(name string) (int, bool) {
	if i, ok := x.exact[name]; ok {
		return i, true
	}
	if i := x.folded[Fold(name)]; i > 0 {
		return i - 1, true
	}
	return 0, false
}

func mergeObject(dst, s, b, m []byte) []byte {
	sm, bm, mm := objectMembers(s), objectMembers(b), objectMembers(m)
	bx, mx := indexOf(bm), indexOf(mm)
	done := make([]bool, len(mm)) // mine's members written
	dst = append(dst, '{')
	first := true
	put := func(raw ...[]byte) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		for _, r := range raw {
			dst = append(dst, r...)
		}
	}
	for _, st := range sm {
		bi, known := bx.find(st.name)
		if !known {
			// Not the type's, unless mine now writes it (an omitempty
			// field set, say): then mine's value stands in the place of
			// the first such member, and any other is dropped (decoded
			// after it, it would undo the change).
			if mi, ok := mx.find(st.name); ok {
				if _, inBase := bx.find(mm[mi].name); !inBase {
					if !done[mi] {
						done[mi] = true
						put(mm[mi].raw)
					}
					continue
				}
			}
			put(st.raw)
			continue
		}
		// Base and mine are both the type's encoding: the same member has
		// the same name in both (a map's keys are matched exactly, as
		// encoding/json matches them).
		mi, kept := mx.exact[bm[bi].name]
		switch {
		case !kept:
			// the type removed it
		case bytes.Equal(bytes.TrimSpace(bm[bi].value), bytes.TrimSpace(mm[mi].value)):
			done[mi] = true
			put(st.raw)
		case done[mi]:
			// written already, for another stored member of this name
		default:
			done[mi] = true
			put(quote(mm[mi].name), []byte{':'})
			dst = merge(dst, st.value, bm[bi].value, mm[mi].value)
		}
	}
	for i, mn := range mm {
		if done[i] {
			continue
		}
		if bi, ok := bx.exact[mn.name]; ok && bytes.Equal(bytes.TrimSpace(bm[bi].value), bytes.TrimSpace(mn.value)) {
			continue // the type's, unchanged, and not stored: stays absent
		}
		put(mn.raw)
	}
	return append(dst, '}')
}

func quote(name string) []byte {
	q, _ := json.Marshal(name)
	return q
}

func arrayElements(doc []byte) [][]byte {
	var out [][]byte
	i := SkipSpace(doc, 1)
	for i < len(doc) && doc[i] != ']' {
		end := SkipValue(doc, i)
		if end < 0 {
			return out
		}
		out = append(out, doc[i:end])
		i = SkipSpace(doc, end)
		if i < len(doc) && doc[i] == ',' {
			i = SkipSpace(doc, i+1)
		}
	}
	return out
}

func mergeArray(dst, s, b, m []byte) []byte {
	se, be, me := arrayElements(s), arrayElements(b), arrayElements(m)
	if len(se) != len(be) {
		return append(dst, m...) // stored and base do not correspond
	}
	// Each of mine's elements equal to one of base's is that element: its
	// stored bytes are kept (the same position first, else the first
	// unclaimed).
	from := make([]int, len(me)) // base element each of mine's is, or -1
	claimed := make([]bool, len(be))
	for k := range me {
		from[k] = -1
		if k < len(be) && bytes.Equal(be[k], me[k]) {
			from[k], claimed[k] = k, true
		}
	}
	for k := range me {
		if from[k] >= 0 {
			continue
		}
		for j := range be {
			if !claimed[j] && bytes.Equal(be[j], me[k]) {
				from[k], claimed[j] = j, true
				break
			}
		}
	}
	dst = append(dst, '[')
	for k := range me {
		if k > 0 {
			dst = append(dst, ',')
		}
		switch j := from[k]; {
		case j >= 0:
			dst = append(dst, se[j]...)
		case len(me) == len(be) && !claimed[k]:
			claimed[k] = true
			dst = merge(dst, se[k], be[k], me[k]) // changed in place
		default:
			dst = append(dst, me[k]...)
		}
	}
	return append(dst, ']')
}

// Only returns the members of doc, a JSON object, named name or
// annotating it (a table property's "name@odata.type"), as a fragment
// (see Add).
func Only(doc []byte, name string) []byte {
	var out []byte
	each(doc, func(raw, n []byte) {
		if string(n) == name || string(n) == name+"@odata.type" {
			if out != nil {
				out = append(out, ',')
			}
			out = append(out, raw...)
		}
	})
	return out
}

// Without returns doc, a JSON object, without its members named name or
// annotating it (a table property's "name@odata.type").
func Without(doc []byte, name string) []byte {
	out := append(make([]byte, 0, len(doc)), '{')
	each(doc, func(raw, n []byte) {
		if string(n) == name || string(n) == name+"@odata.type" {
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, raw...)
	})
	return append(out, '}')
}

// Beyond reports whether stored holds a member that base, a type's
// encoding of it, does not: a member the type does not know, at any depth
// (objects by name, as Merge matches them; arrays element by element when
// their lengths agree).
func Beyond(stored, base []byte) bool {
	s, b := bytes.TrimSpace(stored), bytes.TrimSpace(base)
	switch {
	case bytes.Equal(s, b) || len(s) == 0 || len(b) == 0:
		return false
	case s[0] == '{' && b[0] == '{':
		bm := objectMembers(b)
		bx := indexOf(bm)
		for _, st := range objectMembers(s) {
			bi, ok := bx.find(st.name)
			if !ok || Beyond(st.value, bm[bi].value) {
				return true
			}
		}
	case s[0] == '[' && b[0] == '[':
		se, be := arrayElements(s), arrayElements(b)
		if len(se) != len(be) {
			return false
		}
		for i := range se {
			if Beyond(se[i], be[i]) {
				return true
			}
		}
	}
	return false
}
