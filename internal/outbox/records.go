package outbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// This file is what the records hold, and the two writes that change
// them inside a transaction: an event emitted (the head moved, a pending
// event created) and events marked sent (moved from pending to sent, the
// cursor moved past them).

// Record is one record of an outbox: an event (ID, Seq, Time, Value;
// Sent once relayed), or a head or cursor (Seq alone). The root's
// Outbox keeps its records as a Store of Record.
type Record struct {
	ID    string          `json:"id,omitempty"`
	Seq   int64           `json:"seq"`
	Time  time.Time       `json:"time,omitzero"`
	Value json.RawMessage `json:"value,omitempty"`
	Sent  time.Time       `json:"sent,omitzero"`
}

// Tx is a transaction's view of the records (the root's Tx of Record):
// Get, Put and Delete as Tx's, CreateFresh a create of a key that cannot
// exist yet (numbered from the head), which reads nothing and which a
// batch does not look up.
type Tx interface {
	Get(key string) (Record, error)
	Put(key string, r Record) error
	Delete(key string) error
	CreateFresh(key string, r Record) error
}

// NewID is a new event's ID: 128 random bits in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Emit adds ev (its ID, Time and Value) to tx as the next event of
// scope: it reads scope's head, as a transactional read, and writes it
// moved on by one with the pending event of that Seq.
func (l Layout) Emit(tx Tx, scope string, ev Record) error {
	head, err := tx.Get(l.Head(scope))
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		return err
	}
	seq := head.Seq + 1
	if err := tx.Put(l.Head(scope), Record{Seq: seq}); err != nil {
		return err
	}
	return tx.CreateFresh(l.Pending(scope, seq), Record{ID: ev.ID, Seq: seq, Time: ev.Time, Value: ev.Value})
}

// MarkSent moves events, published in order from the cursor on, from
// pending to sent (stamped sent by now) and advances scope's cursor past
// them, in tx, and returns how many it moved: events another relay
// marked first are left as they are, and not counted.
func (l Layout) MarkSent(tx Tx, scope string, events []driver.Item, now func() time.Time) (int, error) {
	last, _ := l.Seq(events[len(events)-1].Key)
	moved := 0
	cur, err := tx.Get(l.Cursor(scope))
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		return moved, err
	}
	sent := now().UTC()
	for _, it := range events {
		seq, _ := l.Seq(it.Key)
		if seq <= cur.Seq {
			continue // another relay marked it
		}
		r, err := tx.Get(it.Key)
		if err != nil {
			return moved, err
		}
		r.Sent = sent
		if err := tx.Delete(it.Key); err != nil {
			return moved, err
		}
		if err := tx.CreateFresh(l.Sent(scope, seq), r); err != nil {
			return moved, err
		}
		moved++
	}
	if cur.Seq >= last {
		return moved, nil
	}
	return moved, tx.Put(l.Cursor(scope), Record{Seq: last})
}
