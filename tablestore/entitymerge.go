package tablestore

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/members"
)

// A write that starts from a read changes the properties its T changed
// and nothing else (EntityCodec.Merge): a property T does not store, or
// did not change, is never sent, so its stored EDM type never changes.

// property is one entity property: its value and its type annotation (nil
// when the JSON carries none).
type property struct {
	name         string
	value, annot []byte
}

// same reports whether p and q hold the same value, as sent.
func (p property) same(q property) bool {
	return bytes.Equal(p.value, q.value) && bytes.Equal(p.annot, q.annot)
}

// append writes p as members of an entity-properties object.
func (p property) append(dst []byte) []byte {
	if len(dst) > 1 {
		dst = append(dst, ',')
	}
	dst = appendName(dst, p.name)
	dst = append(append(dst, ':'), p.value...)
	if p.annot != nil {
		dst = append(appendName(append(dst, ','), p.name+"@odata.type"), ':')
		dst = append(dst, p.annot...)
	}
	return dst
}

func appendName(dst []byte, name string) []byte {
	dst, _ = appendString(dst, name)
	return dst
}

// properties returns the properties of an entity-properties object, in
// the order of their first member, and their index by name.
func properties(doc []byte) ([]property, map[string]int, error) {
	var ps []property
	at := map[string]int{}
	err := eachMember(doc, func(name, value, _ []byte) bool {
		n, annotation := string(name), false
		if base, ok := bytes.CutSuffix(name, []byte("@odata.type")); ok {
			n, annotation = string(base), true
		}
		i, ok := at[n]
		if !ok {
			i = len(ps)
			at[n] = i
			ps = append(ps, property{name: n})
		}
		if annotation {
			ps[i].annot = value
		} else {
			ps[i].value = value
		}
		return true
	})
	return ps, at, err
}

// Merge applies a change to a stored entity (see etagstore.Codec): base is
// the codec's encoding of the value decoded from stored, mine its encoding
// after the change. Property by property:
//
//   - a property T does not store (another program's, a newer T's; parts
//     F‿k of a field T does not split) is kept as stored, with its type;
//   - one T did not change is kept as stored (with T's type annotation
//     where the service returned none: a whole Double comes back bare);
//   - one T changed is T's new value; a field held as JSON whose stored
//     JSON holds members T does not know is merged as the JSON codec
//     merges documents, keeping them;
//   - one T no longer writes (an emptied omitempty field, a zero time, a
//     part of a split field beyond its new count) is removed: no stale
//     part survives beside a count that does not name it.
//
// changes is the properties T changed, which a write conditioned on the
// version read sends alone (Merge Entity). When a property must be
// removed, a merge cannot say so: changes is nil and the whole entity is
// written, which is refused (matching etagstore.ErrInvalidInput, nothing
// sent) when it holds a whole number with no type annotation that T does
// not store: the service returns whole Edm.Double values so, and writing
// one back would store it as Edm.Int32.
func (EntityCodec) Merge(stored, base, mine []byte) (data, changes []byte, err error) {
	bp, bx, err := properties(base)
	if err != nil {
		return nil, nil, err
	}
	mp, mx, err := properties(mine)
	if err != nil {
		return nil, nil, err
	}
	changes = []byte{'{'}
	for _, m := range mp {
		if i, ok := bx[m.name]; !ok || !bp[i].same(m) {
			changes = m.append(changes)
		}
	}
	changes = append(changes, '}')
	if bytes.Equal(stored, base) {
		for _, b := range bp {
			if _, kept := mx[b.name]; !kept {
				return mine, nil, nil // removes a property: written whole
			}
		}
		return mine, changes, nil
	}
	return mergeEntity(stored, bp, bx, mp, mx)
}

// entityMerge is the state of mergeEntity: T's properties before (base)
// and after (mine) the change, by name, and what it has written.
type entityMerge struct {
	bp, mp           []property
	bx, mx           map[string]int
	done             []bool // mine's properties written
	data, changes    []byte
	removed, untyped string // the first property removed; the first foreign whole number without a type
	repeated         string // the first member a JSON-held property holds twice (its path)
}

func mergeEntity(stored []byte, bp []property, bx map[string]int, mp []property, mx map[string]int) (data, changes []byte, err error) {
	sp, _, err := properties(stored)
	if err != nil {
		return nil, nil, err
	}
	m := &entityMerge{bp: bp, mp: mp, bx: bx, mx: mx, done: make([]bool, len(mp)), data: []byte{'{'}, changes: []byte{'{'}}
	for _, s := range sp {
		m.stored(s)
	}
	m.added()
	data, changes = append(m.data, '}'), append(m.changes, '}')
	switch {
	case m.repeated != "":
		return nil, nil, fmt.Errorf("%w: tablestore: the stored entity holds %q twice (in JSON held by a property), which a read joins into one value: a write would drop what the read did not show (replace it whole with a Doc built by hand)", etagstore.ErrInvalidInput, m.repeated)
	case m.removed == "":
		return data, changes, nil
	case m.untyped != "":
		return nil, nil, fmt.Errorf("%w: tablestore: removing property %s needs the whole entity written, and property %s, which the document type does not store, holds a whole number the service returned without its type (Edm.Int32 and whole Edm.Double values come back alike): written back it would become Edm.Int32; drop it on purpose (Doc.Extra.Without, then Replace) or store it in the type", etagstore.ErrInvalidInput, m.removed, m.untyped)
	}
	return data, nil, nil // a property removed: the whole entity is written
}

// write writes p into the entity, and into the changes if changed.
func (m *entityMerge) write(p property, changed bool) {
	m.data = p.append(m.data)
	if changed {
		m.changes = p.append(m.changes)
	}
}

// stored merges s, a stored property.
func (m *entityMerge) stored(s property) {
	bi, ours := m.bx[s.name]
	mi, inMine := m.mx[s.name]
	if inMine {
		m.done[mi] = true
	}
	switch {
	case !ours && inMine: // T writes it now (an omitempty field set)
		m.write(m.mp[mi], true)
	case !ours: // not T's
		m.write(s, false)
		if m.untyped == "" && s.annot == nil && wholeNumber(s.value) {
			m.untyped = s.name
		}
	case !inMine: // T removed it
		if m.removed == "" {
			m.removed = s.name
		}
	case m.bp[bi].same(m.mp[mi]): // T did not change it
		if s.annot == nil {
			s.annot = m.mp[mi].annot // the service says no type for some; T does
		}
		m.write(s, false)
	default:
		p := m.mp[mi]
		var repeated string
		if p.value, repeated = mergeValue(s.value, m.bp[bi].value, p.value); repeated != "" && m.repeated == "" {
			m.repeated = s.name + "." + repeated
		}
		m.write(p, true)
	}
}

// added writes the properties of mine that were not stored: those T added
// or changed (one T has, unchanged, and the entity lacks stays absent).
func (m *entityMerge) added() {
	for i, p := range m.mp {
		if m.done[i] {
			continue
		}
		if bi, ok := m.bx[p.name]; ok && m.bp[bi].same(p) {
			continue
		}
		m.write(p, true)
	}
}

// wholeNumber reports whether value is a JSON number without a fraction or
// exponent.
func wholeNumber(value []byte) bool {
	if len(value) == 0 {
		return false
	}
	for i, c := range value {
		if !(c >= '0' && c <= '9' || c == '-' && i == 0) {
			return false
		}
	}
	return true
}

// mergeValue is the value of a property T changed from b to m over s, the
// stored value: a string holding JSON (a field held as JSON) whose stored
// JSON holds more than T's has T's change merged into it, keeping the
// rest; any other value is m. repeated is the path of a member the stored
// JSON holds twice (members.Repeated), which no merge can keep: the write
// is refused then.
func mergeValue(s, b, m []byte) (out []byte, repeated string) {
	if len(s) == 0 || s[0] != '"' || len(b) == 0 || b[0] != '"' || len(m) == 0 || m[0] != '"' {
		return m, ""
	}
	st, err1 := unquote(s)
	bt, err2 := unquote(b)
	mt, err3 := unquote(m)
	if err1 != nil || err2 != nil || err3 != nil || st.text == bt.text || !jsonHeld(st.text) || !jsonHeld(bt.text) || !jsonHeld(mt.text) {
		return m, ""
	}
	if path := members.Repeated([]byte(st.text)); path != "" {
		return m, path
	}
	merged := members.Merge([]byte(st.text), []byte(bt.text), []byte(mt.text))
	out, _ = appendString(nil, string(merged))
	return out, ""
}

// jsonHeld reports whether text is a JSON object or array.
func jsonHeld(text string) bool {
	t := bytes.TrimSpace([]byte(text))
	return len(t) > 1 && (t[0] == '{' && t[len(t)-1] == '}' || t[0] == '[' && t[len(t)-1] == ']') && json.Valid(t)
}
