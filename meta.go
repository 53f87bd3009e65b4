package etagstore

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"slices"
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
	ids     []string
	lineage string
	seq     int64
	fence   int64
}

func parseMeta(s string) meta {
	var m meta
	for field := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "w":
			if v != "" {
				m.ids = strings.Split(v, ",")
			}
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
	var parts []string
	if len(m.ids) > 0 {
		parts = append(parts, "w="+strings.Join(m.ids, ","))
	}
	if m.lineage != "" {
		parts = append(parts, "l="+m.lineage, "n="+strconv.FormatInt(m.seq, 10))
	}
	if m.fence > 0 {
		parts = append(parts, "f="+strconv.FormatInt(m.fence, 10))
	}
	return strings.Join(parts, ";")
}

func (m meta) has(id string) bool { return slices.Contains(m.ids, id) }

// lastID is the id of the write that made the version m describes.
func (m meta) lastID() string {
	if len(m.ids) == 0 {
		return ""
	}
	return m.ids[len(m.ids)-1]
}

// fresh is the meta of a write that starts a new history: a new lineage.
func fresh(id string, fence int64) meta {
	return meta{ids: []string{id}, lineage: newWriteID(), seq: 1, fence: fence}
}

// then is the meta of an update of the version m describes, written with
// write id id and fencing token fence (0: none): m's ids plus id, keeping
// the newest keep; the same lineage (a new one if m had none) one step on;
// the higher of the two tokens.
func (m meta) then(id string, keep int, fence int64) meta {
	ids := append(slices.Clip(m.ids), id)
	if len(ids) > keep {
		ids = ids[len(ids)-keep:]
	}
	next := meta{ids: ids, lineage: m.lineage, seq: m.seq + 1, fence: max(m.fence, fence)}
	if next.lineage == "" {
		next.lineage, next.seq = newWriteID(), 1
	}
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
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return idEncoding.EncodeToString(b[:])
}
