// Package meta is the Store's bookkeeping format: the write ids, lineage,
// sequence number and fencing token kept beside every document in
// Item.Meta. Backends that write documents themselves (table batches and
// merges) use it to keep and extend the bookkeeping like a Store write.
package meta

import (
	"encoding/base32"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Meta is the Store's bookkeeping stored beside each document in Item.Meta,
// invisible to T and to the Codec:
//
//   - ids: the write ids of the last few writes, newest last. A write whose
//     response was lost is recognised by finding its id there.
//   - lineage and seq: a random name given by the write that started the
//     document's current history (Create, Replace, Upsert) and a counter
//     that every Update continuing that history increments. Together they
//     tell whether a write whose outcome was lost can still be in the id
//     window, or whether its outcome is unknowable.
//   - fence: the highest fencing token any write carried (see WithFence).
//   - yield: the write was the last of its Store's turn on a key that
//     several processes write, and names that Store (a short random name
//     of its own); the Store pauses before its next write, and the
//     processes waiting for the key take it in turn (engine's
//     handover.go). Only the version that write made carries it.
//
// Encoding: "w=id,id;l=lineage;n=seq;f=fence;y=store", fields omitted when
// empty. Parse skips fields it does not know, so older readers ignore y.
// Ids and lineages are lowercase base32, so the string is printable ASCII.
type Meta struct {
	IDs     string // comma-separated, newest last
	Lineage string
	Seq     int64
	Fence   int64
	Yield   string // the Store whose turn on the key the write ended (empty: none)
	raw     string // the encoding, when known (see then)
}

func Parse(s string) Meta {
	var m Meta
	for s != "" {
		var field string
		field, s, _ = strings.Cut(s, ";")
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "w":
			m.IDs = v
		case "l":
			m.Lineage = v
		case "n":
			m.Seq, _ = strconv.ParseInt(v, 10, 64)
		case "f":
			m.Fence, _ = strconv.ParseInt(v, 10, 64)
		case "y":
			m.Yield = v
		}
	}
	return m
}

func (m Meta) String() string {
	if m.raw != "" {
		return m.raw
	}
	var b strings.Builder
	b.Grow(len(m.IDs) + len(m.Lineage) + 48)
	sep := func(k string) {
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		b.WriteString(k)
	}
	if m.IDs != "" {
		sep("w=")
		b.WriteString(m.IDs)
	}
	var num [20]byte
	if m.Lineage != "" {
		sep("l=")
		b.WriteString(m.Lineage)
		sep("n=")
		b.Write(strconv.AppendInt(num[:0], m.Seq, 10))
	}
	if m.Fence > 0 {
		sep("f=")
		b.Write(strconv.AppendInt(num[:0], m.Fence, 10))
	}
	if m.Yield != "" {
		sep("y=")
		b.WriteString(m.Yield)
	}
	return b.String()
}

// Yielding is m marked as the bookkeeping of a write that ends the turn
// on the key of the Store named store (a base32 name, as NewID's).
func (m Meta) Yielding(store string) Meta {
	if m.Yield != "" {
		m.raw = "" // String builds the encoding again
	}
	m.Yield = store
	if m.raw != "" {
		m.raw += ";y=" + store
	}
	return m
}

// Count is the number of ids in the window.
func (m Meta) Count() int {
	if m.IDs == "" {
		return 0
	}
	return strings.Count(m.IDs, ",") + 1
}

// Has reports whether id is in the window.
func (m Meta) Has(id string) bool {
	if id == "" {
		return false
	}
	for rest := m.IDs; rest != ""; {
		var cur string
		cur, rest, _ = strings.Cut(rest, ",")
		if cur == id {
			return true
		}
	}
	return false
}

// LastID is the id of the write that made the version m describes.
func (m Meta) LastID() string {
	return m.IDs[strings.LastIndexByte(m.IDs, ',')+1:]
}

// Fresh is the meta of a write that starts a new history: a new lineage.
func Fresh(id string, fence int64) Meta {
	return Meta{IDs: id, Lineage: NewID(), Seq: 1, Fence: fence}
}

// Then is the meta of an update of the version m describes, written with
// write id id (a new one if empty) and fencing token fence (0: none): m's
// ids plus id, keeping the newest keep; the same lineage (a new one if m
// had none) one step on; the higher of the two tokens. It encodes the
// result once; its string fields are parts of that encoding (they keep
// no older encoding alive), as Parse's are.
func (m Meta) Then(id string, keep int, fence int64) Meta {
	if m.Lineage == "" { // a history written before lineages: start one
		next := Fresh(id, max(m.Fence, fence))
		if id == "" {
			next = Fresh(NewID(), max(m.Fence, fence))
		}
		return next
	}
	old := m.IDs
	for n := m.Count(); n > keep-1 && old != ""; n-- {
		comma := strings.IndexByte(old, ',')
		if comma < 0 {
			old = ""
			break
		}
		old = old[comma+1:]
	}
	f := max(m.Fence, fence, 0)
	var b strings.Builder
	idn := len(id)
	if id == "" {
		idn = idLen
	}
	b.Grow(thenLen(len(old), idn, len(m.Lineage), m.Seq+1, f))
	b.WriteString("w=")
	if old != "" {
		b.WriteString(old)
		b.WriteByte(',')
	}
	if id != "" {
		b.WriteString(id)
	} else {
		writeID(&b)
	}
	idsEnd := b.Len()
	var num [20]byte
	b.WriteString(";l=")
	lineage := b.Len()
	b.WriteString(m.Lineage)
	lineageEnd := b.Len()
	b.WriteString(";n=")
	b.Write(strconv.AppendInt(num[:0], m.Seq+1, 10))
	if f > 0 {
		b.WriteString(";f=")
		b.Write(strconv.AppendInt(num[:0], f, 10))
	}
	raw := b.String()
	return Meta{IDs: raw[len("w="):idsEnd], Lineage: raw[lineage:lineageEnd], Seq: m.Seq + 1, Fence: f, raw: raw}
}

// thenLen is the length of the encoding Then builds: old ids (and a comma
// after them, if any), a new id, a lineage, seq and fence (0: none).
func thenLen(old, id, lineage int, seq, fence int64) int {
	n := len("w=") + old + min(old, 1) + id + len(";l=") + lineage + len(";n=") + digits(seq)
	if fence > 0 {
		n += len(";f=") + digits(fence)
	}
	return n
}

// digits is the number of characters of n in decimal.
func digits(n int64) int {
	d := 1
	for ; n >= 10 || n <= -10; n /= 10 {
		d++
	}
	if n < 0 {
		d++
	}
	return d
}

// idLen is the length of an id: 80 bits in base32.
const idLen = 16

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// LandedIn reports whether the version described by stored holds the write
// whose bookkeeping is m: m's id is in the stored window, or m started a
// history (seq 1) and stored continues it.
func (m Meta) LandedIn(stored Meta) bool {
	return stored.Has(m.LastID()) || m.Seq == 1 && m.Lineage != "" && stored.Lineage == m.Lineage
}

// Covers reports whether slot seq of m's history is in the window of ids m
// keeps: the window holds the ids of the last min(len(ids), seq) writes.
// The window is the document's own, whatever the reading Store keeps.
func (m Meta) Covers(seq int64) bool {
	n := min(int64(m.Count()), m.Seq)
	return seq > m.Seq-n && seq <= m.Seq
}

// NewID returns a random 80-bit id (16 characters).
func NewID() string {
	var b strings.Builder
	writeID(&b)
	return b.String()
}

// writeID appends a random 80-bit id (16 characters) to b. The bits come
// from math/rand/v2's global generator (ChaCha8 per thread, seeded by the
// operating system): as unique as crypto/rand's, without its system call
// on every write.
func writeID(b *strings.Builder) {
	var raw [10]byte
	var enc [idLen]byte
	binary.LittleEndian.PutUint64(raw[:8], rand.Uint64())
	binary.LittleEndian.PutUint16(raw[8:], uint16(rand.Uint32()))
	idEncoding.Encode(enc[:], raw[:])
	b.Write(enc[:])
}
