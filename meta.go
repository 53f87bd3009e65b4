package etagstore

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"strconv"
	"strings"
)

// meta is the Store's bookkeeping stored beside each document in Item.Meta,
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
//
// Encoding: "w=id,id;l=lineage;n=seq;f=fence", fields omitted when empty.
// Ids and lineages are lowercase base32, so the string is printable ASCII.
type meta struct {
	ids     string // comma-separated, newest last
	lineage string
	seq     int64
	fence   int64
	raw     string // the encoding, when known (see then)
}

func parseMeta(s string) meta {
	var m meta
	for field := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "w":
			m.ids = v
		case "l":
			m.lineage = v
		case "n":
			m.seq, _ = strconv.ParseInt(v, 10, 64)
		case "f":
			m.fence, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m
}

func (m meta) String() string {
	if m.raw != "" {
		return m.raw
	}
	var b strings.Builder
	b.Grow(len(m.ids) + len(m.lineage) + 48)
	sep := func(k string) {
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		b.WriteString(k)
	}
	if m.ids != "" {
		sep("w=")
		b.WriteString(m.ids)
	}
	var num [20]byte
	if m.lineage != "" {
		sep("l=")
		b.WriteString(m.lineage)
		sep("n=")
		b.Write(strconv.AppendInt(num[:0], m.seq, 10))
	}
	if m.fence > 0 {
		sep("f=")
		b.Write(strconv.AppendInt(num[:0], m.fence, 10))
	}
	return b.String()
}

// count is the number of ids in the window.
func (m meta) count() int {
	if m.ids == "" {
		return 0
	}
	return strings.Count(m.ids, ",") + 1
}

// has reports whether id is in the window.
func (m meta) has(id string) bool {
	if id == "" {
		return false
	}
	for rest := m.ids; rest != ""; {
		var cur string
		cur, rest, _ = strings.Cut(rest, ",")
		if cur == id {
			return true
		}
	}
	return false
}

// lastID is the id of the write that made the version m describes.
func (m meta) lastID() string {
	return m.ids[strings.LastIndexByte(m.ids, ',')+1:]
}

// fresh is the meta of a write that starts a new history: a new lineage.
func fresh(id string, fence int64) meta {
	return meta{ids: id, lineage: newWriteID(), seq: 1, fence: fence}
}

// then is the meta of an update of the version m describes, written with
// write id id (a new one if empty) and fencing token fence (0: none): m's
// ids plus id, keeping the newest keep; the same lineage (a new one if m
// had none) one step on; the higher of the two tokens. It encodes the
// result once and takes every field from that encoding.
func (m meta) then(id string, keep int, fence int64) meta {
	if m.lineage == "" { // a history written before lineages: start one
		next := fresh(id, max(m.fence, fence))
		if id == "" {
			next = fresh(newWriteID(), max(m.fence, fence))
		}
		return next
	}
	old := m.ids
	for n := m.count(); n > keep-1 && old != ""; n-- {
		comma := strings.IndexByte(old, ',')
		if comma < 0 {
			old = ""
			break
		}
		old = old[comma+1:]
	}
	var b strings.Builder
	b.Grow(len(old) + len(m.lineage) + 64)
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
	var num [20]byte
	b.WriteString(";l=")
	b.WriteString(m.lineage)
	b.WriteString(";n=")
	b.Write(strconv.AppendInt(num[:0], m.seq+1, 10))
	if f := max(m.fence, fence); f > 0 {
		b.WriteString(";f=")
		b.Write(strconv.AppendInt(num[:0], f, 10))
	}
	raw := b.String()
	next := parseMeta(raw)
	next.raw = raw
	return next
}

// ungroupedKey marks a context whose writes must not be combined with
// other callers' (see Ungrouped).
type ungroupedKey struct{}

// Ungrouped returns a context whose Updates are not committed together with
// other callers' (group commit), because it carries write state of its own
// that a shared write would not honour for everyone — a lease id, say.
// blobstore.WithLease uses it; fenced contexts (WithFence) are never grouped
// either.
func Ungrouped(ctx context.Context) context.Context {
	return context.WithValue(ctx, ungroupedKey{}, true)
}

func isUngrouped(ctx context.Context) bool {
	if _, fenced := FenceFrom(ctx); fenced {
		return true
	}
	v, _ := ctx.Value(ungroupedKey{}).(bool)
	return v
}

// fenceKey is the context key of a fencing token.
type fenceKey struct{}

// WithFence returns a context whose writes through a Store carry the
// fencing token token (from a lock such as blobstore's). A document records
// the highest token written to it; a write carrying a lower token is refused
// with ErrFenced. The check is made against the version read and committed
// with If-Match of that version, so it is atomic on every backend.
//
// Update, Save, Replace and Delete honour the token (Replace and Delete then
// read the document first); Create records it; Upsert, which checks nothing,
// refuses a fenced context with ErrInvalidInput. An unfenced Replace or
// Upsert starts a new history and forgets the recorded token.
func WithFence(ctx context.Context, token int64) context.Context {
	return context.WithValue(ctx, fenceKey{}, token)
}

// FenceFrom returns the fencing token carried by ctx, if any.
func FenceFrom(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(fenceKey{}).(int64)
	return t, ok
}

// checkFence refuses a write carrying token over a version whose meta
// records a higher one.
func checkFence(key string, stored meta, token int64) error {
	if stored.fence > token {
		return errorf(ErrFenced, "%q carries fencing token %d, the write only %d", key, stored.fence, token)
	}
	return nil
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newWriteID returns a random 80-bit id (16 characters).
func newWriteID() string {
	var b strings.Builder
	writeID(&b)
	return b.String()
}

// writeID appends a random 80-bit id (16 characters) to b.
func writeID(b *strings.Builder) {
	var raw [10]byte
	var enc [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails (Go 1.24+)
	idEncoding.Encode(enc[:], raw[:])
	b.Write(enc[:])
}
