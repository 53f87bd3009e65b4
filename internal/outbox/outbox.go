// Package outbox lays out a transactional outbox's records among a
// backend's index entries (driver.Entries), in the commit scope of the
// documents whose transaction emitted them, so that they commit in the
// same atomic request: per scope, a head (the last sequence number
// assigned), a cursor (the last one relayed), and one record per event,
// pending until relayed, then sent. It knows no event type: the root's
// Outbox stores its records (Record) through a Store over Backend, which
// accepts these keys, and changes them in a transaction through Tx
// (records.go: an event emitted, events marked sent); Read reads a
// partition's events back (read.go). The relay is internal/relay's.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/etagstore/etagstore/driver"
)

// This file names the records. In scope, the records of the outbox named
// name are the entries
//
//	o.<name>.h                the head: the last sequence number assigned
//	o.<name>.c                the cursor: the last one relayed
//	o.<name>.p.<seq>          an event not relayed yet (pending)
//	o.<name>.s.<seq>          an event relayed (sent), kept for the retention
//
// where <seq> is the sequence number in 16 decimal digits, so that a
// scope's events list in order, and the pending events of every scope
// are one range of names (Entries.Range).

// SeqDigits is a sequence number's width in a name.
const SeqDigits = 16

// Layout is the records of one outbox over a backend that keeps entries.
type Layout struct {
	Name  string
	Space *driver.Entries
}

func (l Layout) name(scope, rest string) string { return l.Space.Key(scope, "o."+l.Name+"."+rest) }

// Head is the key of scope's head.
func (l Layout) Head(scope string) string { return l.name(scope, "h") }

// Cursor is the key of scope's cursor.
func (l Layout) Cursor(scope string) string { return l.name(scope, "c") }

// Pending is the key of scope's event seq while it is pending.
func (l Layout) Pending(scope string, seq int64) string {
	return l.name(scope, fmt.Sprintf("p.%0*d", SeqDigits, seq))
}

// Sent is the key of scope's event seq once it is sent.
func (l Layout) Sent(scope string, seq int64) string {
	return l.name(scope, fmt.Sprintf("s.%0*d", SeqDigits, seq))
}

// Seq is the sequence number of an event's key (false: not one).
func (l Layout) Seq(key string) (int64, bool) {
	i := strings.LastIndexByte(key, '.')
	if i < 0 || len(key)-i-1 != SeqDigits {
		return 0, false
	}
	n, err := strconv.ParseInt(key[i+1:], 10, 64)
	return n, err == nil
}

// PendingPrefix and SentPrefix start the keys of scope's pending and sent
// events.
func (l Layout) PendingPrefix(scope string) string { return l.name(scope, "p.") }
func (l Layout) SentPrefix(scope string) string    { return l.name(scope, "s.") }

// AllPending yields the pending events of every scope: by scope, and in
// order within one.
func (l Layout) AllPending(ctx context.Context) iter.Seq2[driver.Item, error] {
	from := "o." + l.Name + ".p."
	return l.Space.Range(ctx, from, "o."+l.Name+".p/") // '/' follows '.'
}

// Backend is a backend over which a Store keeps an outbox's records: b,
// whose ValidateKey also accepts the records' keys. It unwraps to b, so
// that the Store commits together with Stores over b (Unwrap).
type Backend struct {
	driver.Backend
	Layout Layout
}

// ValidateKey accepts the keys of the outbox's records, and what b does.
func (b Backend) ValidateKey(key string) error {
	if scope, err := b.Layout.Space.Scope(key); err == nil && strings.HasPrefix(key, b.Layout.Space.Key(scope, "o."+b.Layout.Name+".")) {
		return nil
	}
	if err := b.Backend.ValidateKey(key); err != nil {
		return err
	}
	return driver.Errorf(driver.ErrInvalidKey, "%q is no key of outbox %q", key, b.Layout.Name)
}

// Unwrap is the backend b wraps.
func (b Backend) Unwrap() driver.Backend { return b.Backend }

// ErrNoEntries is why an outbox cannot be kept over a backend: it keeps
// no entries, or cannot commit several of them with documents.
var ErrNoEntries = fmt.Errorf("%w: an outbox needs a backend that commits its records with documents (tables, memstore; blobs cannot)", errors.ErrUnsupported)

// Usable reports whether b can keep an outbox.
func Usable(b driver.Backend) error {
	a := b.Abilities()
	if a.Entries == nil || a.Entries.Range == nil || a.Commit == nil {
		return ErrNoEntries
	}
	return nil
}
