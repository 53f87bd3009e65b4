package tablestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/azerr"
)

// MaxBatchActions is the most actions an entity group transaction may hold.
const MaxBatchActions = 100

// Batch is a typed entity group transaction: up to 100 actions on entities
// of one partition, applied all together or not at all. Build it with
// NewBatch, add actions, then Submit. Every replace, merge and delete
// carries its own ETag (ETagAny is allowed, an empty one is
// etagstore.ErrETagRequired): a batch update is never sent without one.
//
// A Batch is not safe for concurrent use.
type Batch[T any] struct {
	store   *etagstore.Store[T]
	backend *Backend
	actions []batchAction[T]
	err     error // the first invalid action; Submit returns it
}

type batchAction[T any] struct {
	extra  etagstore.Extra
	op     access.Kind
	key    string
	etag   etagstore.ETag
	value  T
	fields []string
}

// NewBatch returns an empty batch on s, which must be a Store on a table
// Backend (otherwise Submit fails with errors.ErrUnsupported).
func NewBatch[T any](s *etagstore.Store[T]) *Batch[T] {
	b := &Batch[T]{store: s}
	b.backend, b.err = tableOf(s, "NewBatch")
	return b
}

func (b *Batch[T]) add(a batchAction[T]) *Batch[T] {
	if b.err == nil && (a.op == access.Replace || a.op == access.Merge || a.op == access.Delete) && a.etag == "" {
		b.err = fmt.Errorf("%w: batch action %d (%s %q)", etagstore.ErrETagRequired, len(b.actions), actionNames[kindTypes[a.op]], a.key)
	}
	b.actions = append(b.actions, a)
	return b
}

// Create inserts v under key; the batch fails with etagstore.ErrExists if
// it exists.
func (b *Batch[T]) Create(key string, v T) *Batch[T] {
	return b.add(batchAction[T]{op: access.Create, key: key, value: v})
}

// Replace replaces d.Key with d.Value if its ETag is still d.ETag, keeping
// the properties d.Extra holds (those T does not know; see etagstore.Doc).
// ETagAny with a Doc a read or write returned matches
// etagstore.ErrInvalidInput at Submit (nothing is sent) unless the context
// is fenced: sent blind, it would put back what others changed since the
// read. A fenced batch reads first and writes the Doc's change onto the
// version read, as Store.Replace does; a Doc built by hand writes T alone.
func (b *Batch[T]) Replace(d etagstore.Doc[T]) *Batch[T] {
	return b.add(batchAction[T]{op: access.Replace, key: d.Key, etag: d.ETag, value: d.Value, extra: d.Extra})
}

// Merge writes the named properties of d.Value (every property d.Value
// has if none are named) if the entity's ETag is still d.ETag; other
// properties keep their stored values. It reads nothing: what it cannot
// remove is as for UpsertMerge.
func (b *Batch[T]) Merge(d etagstore.Doc[T], properties ...string) *Batch[T] {
	return b.add(batchAction[T]{op: access.Merge, key: d.Key, etag: d.ETag, value: d.Value, fields: properties})
}

// Upsert inserts or replaces v under key with no concurrency check.
func (b *Batch[T]) Upsert(key string, v T) *Batch[T] {
	return b.add(batchAction[T]{op: access.Upsert, key: key, value: v})
}

// UpsertMerge writes the named properties of v (every property v has if
// none are named) under key, inserting them alone on a missing key, with
// no concurrency check; see the package-level UpsertMerge.
func (b *Batch[T]) UpsertMerge(key string, v T, properties ...string) *Batch[T] {
	return b.add(batchAction[T]{op: access.UpsertMerge, key: key, value: v, fields: properties})
}

// Delete deletes key if its ETag is still etag (ETagAny: any version).
func (b *Batch[T]) Delete(key string, etag etagstore.ETag) *Batch[T] {
	return b.add(batchAction[T]{op: access.Delete, key: key, etag: etag})
}

// Len returns the number of actions added.
func (b *Batch[T]) Len() int { return len(b.actions) }

// BatchError reports the action that made a transaction fail; nothing in
// the batch was written. It unwraps to the action's error, so errors.Is
// matches its sentinel; a stale ETag is a *etagstore.ConflictError[T]
// holding the current entity. Index is -1 when the service named no action.
type BatchError struct {
	Index int
	Op    string
	Key   string
	Err   error
}

// Error is one line: the service's answer where it names the action
// (commit names it), else the action's error followed by the action.
func (e *BatchError) Error() string {
	var se *azerr.ServiceError
	if e.Index >= 0 && errors.As(e.Err, &se) && se.Key == e.Key {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v (batch action %d: %s %q)", e.Err, e.Index, e.Op, e.Key)
}

func (e *BatchError) Unwrap() error { return e.Err }

// Submit sends the batch as one entity group transaction, through the
// Store's engine (see Merge). Invalid input — no actions, more than
// MaxBatchActions, keys in different partitions, one key twice, a missing
// ETag, a bad key or document — is reported before anything is sent. A
// failed transaction returns a *BatchError naming the action; a stale ETag
// is a *etagstore.ConflictError[T] holding the current entity. It returns
// each action's new ETag, in the order of the actions ("" for a delete),
// read from the transaction's response.
//
// The actions keep the Store's bookkeeping (see Merge): Create, Replace and
// Upsert start a new history with a write id of their own, as the Store's
// Create, Replace and Upsert do; Merge and UpsertMerge leave the stored
// bookkeeping as it is.
//
// A fenced context (etagstore.WithFence) is honoured like a Store write:
// a batch holding an Upsert or UpsertMerge, which check nothing, matches
// etagstore.ErrInvalidInput and nothing is sent. Submit then reads every
// entity first, checks its ETag (ETagAny: any) and its fencing token (a
// higher one: etagstore.ErrFenced, in a *BatchError) and sends each action
// with If-Match of the version it checked, so the check is atomic; Replace
// and Merge continue that version's history and record the token, as does
// Create. A fenced batch that loses a race is checked and built again on
// the new versions, with the Store's backoff.
//
// On a Store with indexes (etagstore.Unique, Lookup, or an Expiry) Submit
// sends each action conditioned on the version it replaces, carrying the
// index entries each change implies in the same transaction. It reads
// first (one ReadMany: a query per 14 keys) only the entities whose
// version it does not know: a Create replaces none (it is sent as a
// create, and an existing key fails the transaction with
// etagstore.ErrExists, in a *BatchError; on a Store with an Expiry it
// reads, to replace an expired document); a Replace or Delete knows the
// version its ETag names when its Doc holds it (a Doc a read or write
// returned) or the Store's version cache does (with ETagAny: any version
// the cache holds); an Upsert knows the version the cache holds, and is
// conditioned on it. A version known but stale (another writer came in
// between) only fails the transaction: the batch is then built again over
// the versions it reads. A batch holding a Merge or UpsertMerge, which
// send properties alone, matches errors.ErrUnsupported and nothing is
// sent.
//
// A throttled transaction (503 ServerBusy) is sent again after a pause. One
// whose answer was lost is resolved by reading the entities: when one of
// them holds a write id of the batch, it committed (Submit returns nil);
// when one still holds the version its action was conditioned on, it has
// not landed and is sent again; when no read can tell (a batch of merges
// and deletes only, say), the error is an *etagstore.OutcomeUnknownError.
func (b *Batch[T]) Submit(ctx context.Context) ([]etagstore.ETag, error) {
	if b.err != nil {
		return nil, b.err
	}
	w := access.Write[T]{Batch: true, Actions: make([]access.Action[T], len(b.actions))}
	for i, a := range b.actions {
		act := access.Action[T]{Kind: a.op, Key: a.key, ETag: a.etag, Mine: a.value, Extra: a.extra}
		if a.op != access.Delete {
			act.Encode = encodeProperties(b.store, a.value, a.fields, a.op == access.Merge || a.op == access.UpsertMerge)
		}
		w.Actions[i] = act
	}
	etags, err := b.store.DeliverWrite(ctx, w)
	var ae *driver.ActionError
	if errors.As(err, &ae) {
		be := &BatchError{Index: ae.Index, Err: ae.Err}
		if ae.Index >= 0 && ae.Index < len(b.actions) {
			be.Op, be.Key = actionNames[kindTypes[b.actions[ae.Index].op]], b.actions[ae.Index].key
		}
		return nil, be
	}
	return etags, err
}
