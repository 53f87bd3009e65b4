package tablestore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azretry"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/outcome"
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

type batchOp string

const (
	opCreate      batchOp = "create"
	opReplace     batchOp = "replace"
	opMerge       batchOp = "merge"
	opUpsert      batchOp = "upsert"
	opUpsertMerge batchOp = "upsert-merge"
	opDelete      batchOp = "delete"
)

type batchAction[T any] struct {
	op     batchOp
	key    string
	etag   etagstore.ETag
	value  T
	fields []string
}

// NewBatch returns an empty batch on s, which must be a Store on a table
// Backend (otherwise Submit fails with etagstore.ErrInvalidInput).
func NewBatch[T any](s *etagstore.Store[T]) *Batch[T] {
	b := &Batch[T]{store: s}
	b.backend, b.err = tableOf(s, "NewBatch")
	return b
}

func (b *Batch[T]) add(a batchAction[T]) *Batch[T] {
	if b.err == nil && (a.op == opReplace || a.op == opMerge || a.op == opDelete) && a.etag == "" {
		b.err = fmt.Errorf("%w: batch action %d (%s %q)", etagstore.ErrETagRequired, len(b.actions), a.op, a.key)
	}
	b.actions = append(b.actions, a)
	return b
}

// Create inserts v under key; the batch fails with etagstore.ErrExists if
// it exists.
func (b *Batch[T]) Create(key string, v T) *Batch[T] {
	return b.add(batchAction[T]{op: opCreate, key: key, value: v})
}

// Replace replaces d.Key with d.Value if its ETag is still d.ETag.
func (b *Batch[T]) Replace(d etagstore.Doc[T]) *Batch[T] {
	return b.add(batchAction[T]{op: opReplace, key: d.Key, etag: d.ETag, value: d.Value})
}

// Merge writes only the named properties of d.Value (all if none are
// named) if the entity's ETag is still d.ETag; other properties keep their
// stored values.
func (b *Batch[T]) Merge(d etagstore.Doc[T], properties ...string) *Batch[T] {
	return b.add(batchAction[T]{op: opMerge, key: d.Key, etag: d.ETag, value: d.Value, fields: properties})
}

// Upsert inserts or replaces v under key with no concurrency check.
func (b *Batch[T]) Upsert(key string, v T) *Batch[T] {
	return b.add(batchAction[T]{op: opUpsert, key: key, value: v})
}

// UpsertMerge inserts v under key or merges the named properties (all if
// none are named) into the stored entity, with no concurrency check.
func (b *Batch[T]) UpsertMerge(key string, v T, properties ...string) *Batch[T] {
	return b.add(batchAction[T]{op: opUpsertMerge, key: key, value: v, fields: properties})
}

// Delete deletes key if its ETag is still etag (ETagAny: any version).
func (b *Batch[T]) Delete(key string, etag etagstore.ETag) *Batch[T] {
	return b.add(batchAction[T]{op: opDelete, key: key, etag: etag})
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

func (e *BatchError) Error() string {
	return fmt.Sprintf("tablestore: batch action %d (%s %q) failed: %v", e.Index, e.Op, e.Key, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

// Submit sends the batch as one entity group transaction. Invalid input —
// no actions, more than MaxBatchActions, keys in different partitions, one
// key twice, a missing ETag, a bad key or document — is reported before
// anything is sent. A failed transaction returns a *BatchError naming the
// action. The service does not return per-action ETags; Get the documents
// again when you need them.
//
// The actions keep the Store's bookkeeping (see Merge): Create, Replace and
// Upsert start a new history with a write id of their own, as the Store's
// Create, Replace and Upsert do; Merge and UpsertMerge leave the stored
// bookkeeping as it is.
//
// A fenced context (etagstore.WithFence) is honoured like a Store write:
// a batch holding an Upsert or UpsertMerge, which check nothing, matches
// etagstore.ErrInvalidInput and nothing is sent. Before sending, Submit
// reads every entity a Replace, Merge or Delete names, checks its ETag
// (ETagAny: any) and its fencing token (a higher one: etagstore.ErrFenced,
// in a *BatchError) and sends the action with If-Match of the version it
// checked, so the check is atomic; Replace and Merge then continue that
// version's history and record the token, as does Create.
//
// A transaction whose answer was lost is resolved by reading the entities:
// when one of them holds a write id of the batch, it committed (Submit
// returns nil); when one still holds the version its action was
// conditioned on, it has not landed and is sent again; when no read can
// tell (a batch of merges and deletes only, say), the error is an
// *etagstore.OutcomeUnknownError.
func (b *Batch[T]) Submit(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	if len(b.actions) == 0 || len(b.actions) > MaxBatchActions {
		return fmt.Errorf("%w: tablestore: a batch holds 1 to %d actions, this one %d", etagstore.ErrInvalidInput, MaxBatchActions, len(b.actions))
	}
	codec := b.store.Codec()
	fence, fenced := etagstore.FenceFrom(ctx)
	sent := make([]sentAction, len(b.actions))
	var partition string
	rows := map[string]bool{}
	for i, a := range b.actions {
		fail := func(err error) error { return &BatchError{Index: i, Op: string(a.op), Key: a.key, Err: err} }
		if err := driver.CheckKey(a.key); err != nil {
			return fail(err)
		}
		pk, rk, err := b.backend.split(a.key)
		if err != nil {
			return fail(err)
		}
		if i == 0 {
			partition = pk
		} else if pk != partition {
			return fail(fmt.Errorf("%w: partition %q differs from the batch's %q", etagstore.ErrInvalidInput, pk, partition))
		}
		if rows[rk] {
			return fail(fmt.Errorf("%w: row %q appears twice in the batch", etagstore.ErrInvalidInput, rk))
		}
		rows[rk] = true
		if fenced && (a.op == opUpsert || a.op == opUpsertMerge) {
			return fail(fmt.Errorf("%w: %s checks nothing and cannot honour a fencing token", etagstore.ErrInvalidInput, a.op))
		}
		data := []byte("{}")
		if a.op != opDelete {
			if data, err = codec.Marshal(a.value); err != nil {
				return fail(err)
			}
			if data, err = selectProperties(data, a.fields); err != nil {
				return fail(err)
			}
		}
		if _, err := entity(pk, rk, "", data); err != nil {
			return fail(err)
		}
		if a.etag != "" && !fenced {
			if err := checkETag(a.etag); err != nil {
				return fail(err) // a conflict, refused before sending, as for Store.Replace
			}
		}
		sent[i] = sentAction{key: a.key, pk: pk, rk: rk, data: data, ifMatch: a.etag}
	}
	// The bookkeeping, after every check that needs no request.
	for i, a := range b.actions {
		sa := &sent[i]
		switch {
		case fenced && a.op != opCreate:
			it, err := b.backend.Read(ctx, a.key)
			if err == nil && a.etag != etagstore.ETagAny && it.ETag != a.etag {
				err = conflictWith(b.store, it, a.etag, a.value, 1)
			}
			stored := meta.Parse(it.Meta)
			if err == nil && stored.Fence > fence {
				err = fmt.Errorf("%w: %q carries fencing token %d, the batch only %d", etagstore.ErrFenced, a.key, stored.Fence, fence)
			}
			if err != nil {
				return &BatchError{Index: i, Op: string(a.op), Key: a.key, Err: err}
			}
			sa.ifMatch = it.ETag // atomic with the checks
			if a.op != opDelete {
				sa.meta, sa.hasMeta = extend(stored, fence), true
			}
		case a.op == opCreate:
			sa.meta, sa.hasMeta = meta.Fresh(meta.NewID(), fence), true
		case a.op == opReplace, a.op == opUpsert:
			sa.meta, sa.hasMeta = meta.Fresh(meta.NewID(), 0), true
		}
		if len(sa.meta.String()) > driver.MaxMetaLen {
			return &BatchError{Index: i, Op: string(a.op), Key: a.key, Err: fmt.Errorf("%w: bookkeeping of %d bytes", etagstore.ErrTooLarge, len(sa.meta.String()))}
		}
	}
	actions := make([]aztables.TransactionAction, len(b.actions))
	for i, a := range b.actions {
		sa := sent[i]
		body, err := entity(sa.pk, sa.rk, sa.meta.String(), sa.data) // no bookkeeping property without meta
		if err != nil {
			return &BatchError{Index: i, Op: string(a.op), Key: a.key, Err: err}
		}
		act := aztables.TransactionAction{Entity: body}
		switch a.op {
		case opCreate:
			act.ActionType = aztables.TransactionTypeAdd
		case opUpsert:
			act.ActionType = aztables.TransactionTypeInsertReplace
		case opUpsertMerge:
			act.ActionType = aztables.TransactionTypeInsertMerge
		case opReplace, opMerge, opDelete:
			act.ActionType = map[batchOp]aztables.TransactionType{opReplace: aztables.TransactionTypeUpdateReplace, opMerge: aztables.TransactionTypeUpdateMerge, opDelete: aztables.TransactionTypeDelete}[a.op]
			etag := azcore.ETag(sa.ifMatch) // never nil: nil would mean "*" or an upsert
			act.IfMatch = &etag
		}
		actions[i] = act
	}
	return b.send(ctx, actions, sent)
}

// sentAction is an action as sent: its key, properties, the ETag it is
// conditioned on and the bookkeeping it writes (when hasMeta).
type sentAction struct {
	key, pk, rk string
	data        []byte
	ifMatch     etagstore.ETag
	meta        meta.Meta
	hasMeta     bool
}

// send submits the transaction until its fate is known (see Submit).
func (b *Batch[T]) send(ctx context.Context, actions []aztables.TransactionAction, sent []sentAction) error {
	var lost error // the failure that left a try unsettled
	for try := 1; ; try++ {
		if err := ctx.Err(); err != nil { // nothing sent now
			if lost != nil {
				return &etagstore.OutcomeUnknownError{Op: "Batch", Key: sent[0].key, Cause: errors.Join(lost, err)}
			}
			return err
		}
		// The SDK's retries are off: a blind retry of a committed batch
		// would fail on its own writes.
		_, err := b.backend.client.SubmitTransaction(azretry.NoRetry(ctx), actions, nil)
		switch {
		case err == nil:
			return nil
		case lost == nil && refused(err):
			return b.failure(ctx, err) // a definite answer to the only try
		case lost == nil:
			lost = err
		}
		landed, err := b.settle(ctx, sent)
		switch {
		case err != nil:
			return &etagstore.OutcomeUnknownError{Op: "Batch", Key: sent[0].key, Cause: errors.Join(lost, err)}
		case landed == batchCommitted:
			return nil
		case landed == batchNotLanded && try < maxTries:
			continue
		}
		return &etagstore.OutcomeUnknownError{Op: "Batch", Key: sent[0].key, Cause: lost}
	}
}

type batchVerdict uint8

const (
	batchUnknown batchVerdict = iota
	batchCommitted
	batchNotLanded
)

// settle reads the entities of a transaction whose answer was lost. The
// transaction is atomic: one entity holding a write id of it proves it
// committed; one still holding the version its action was conditioned on
// proves it has not landed (the same transaction sent again cannot land
// as well, as it carries the same condition).
func (b *Batch[T]) settle(ctx context.Context, sent []sentAction) (batchVerdict, error) {
	for _, sa := range sent {
		conditioned := sa.ifMatch != "" && sa.ifMatch != etagstore.ETagAny
		if !sa.hasMeta && !conditioned {
			continue // nothing a read could tell of this action
		}
		it, err := b.backend.Read(ctx, sa.key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return batchUnknown, err
		}
		// The transaction is atomic: one action found committed, or one
		// still conditioned on the current version, settles it.
		switch outcome.Resolve(outcome.Sent{IfMatch: string(sa.ifMatch), Meta: sa.meta}, observed(it, err)) {
		case outcome.Committed:
			return batchCommitted, nil
		case outcome.NotLanded:
			return batchNotLanded, nil
		}
	}
	return batchUnknown, nil
}

// observed is what the resolver needs of a read.
func observed(it driver.Item, err error) outcome.Observed {
	if err != nil {
		return outcome.Observed{}
	}
	return outcome.Observed{Found: true, ETag: string(it.ETag), Meta: meta.Parse(it.Meta)}
}

// failure is the *BatchError of a transaction the service refused.
func (b *Batch[T]) failure(ctx context.Context, err error) error {
	index, err := batchFailure(err)
	if index < 0 || index >= len(b.actions) {
		return &BatchError{Index: -1, Err: err}
	}
	a := b.actions[index]
	if errors.Is(err, etagstore.ErrConflict) {
		err = conflict(ctx, b.store, a.key, a.etag, a.value, err)
	}
	return &BatchError{Index: index, Op: string(a.op), Key: a.key, Err: err}
}

// selectProperties keeps only the named properties (and their type
// annotations) of an entity-properties object; no names keeps all.
func selectProperties(data []byte, names []string) ([]byte, error) {
	if len(names) == 0 {
		return data, nil
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(data, &props); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, 2*len(names))
	for _, n := range names {
		v, ok := props[n]
		if !ok {
			return nil, fmt.Errorf("%w: tablestore: no property %q in the document", etagstore.ErrInvalidInput, n)
		}
		out[n] = v
		if t, ok := props[n+"@odata.type"]; ok {
			out[n+"@odata.type"] = t
		}
	}
	return json.Marshal(out)
}

// batchFailure reads a failed transaction. The SDK reports it as a
// *azcore.ResponseError with StatusCode 202 and no ErrorCode; the inner
// response in the multipart body holds the real status and error code, and
// the message starts with the failing action's index ("2:The update
// condition…"). It returns that index (-1 if unknown) and the error mapped
// to etagstore's sentinels.
func batchFailure(err error) (int, error) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusAccepted || re.RawResponse == nil {
		return -1, mapError("batch", "", err)
	}
	body, rerr := runtime.Payload(re.RawResponse)
	if rerr != nil {
		return -1, mapError("batch", "", err)
	}
	status, code, message, ok := innerFailure(re.RawResponse.Header.Get("Content-Type"), body)
	if !ok {
		return -1, fmt.Errorf("tablestore: batch failed and its response could not be read: %w", err)
	}
	index := -1
	if m := indexPrefix.FindStringSubmatch(message); m != nil {
		index, _ = strconv.Atoi(m[1])
	}
	inner := &azcore.ResponseError{ErrorCode: code, StatusCode: status, RawResponse: re.RawResponse}
	return index, fmt.Errorf("%w (inner status %d, %s: %s)", mapError("batch", "", inner), status, code, strings.TrimSpace(message))
}

var indexPrefix = regexp.MustCompile(`^\s*(\d+):`)

// innerFailure finds the first inner response with a status of 400 or more
// in a (possibly nested) multipart/mixed batch response.
func innerFailure(contentType string, body []byte) (status int, code, message string, ok bool) {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["boundary"] == "" {
		return 0, "", "", false
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			return 0, "", "", false
		}
		data, err := io.ReadAll(part)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, "", "", false
		}
		ct := part.Header.Get("Content-Type")
		if strings.HasPrefix(ct, "multipart/") {
			if s, c, m, ok := innerFailure(ct, data); ok {
				return s, c, m, true
			}
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
		if err != nil || resp.StatusCode < 400 {
			continue
		}
		payload, _ := io.ReadAll(resp.Body)
		var e struct {
			Err struct {
				Code    string `json:"code"`
				Message struct {
					Value string `json:"value"`
				} `json:"message"`
			} `json:"odata.error"`
		}
		_ = json.Unmarshal(payload, &e)
		return resp.StatusCode, e.Err.Code, e.Err.Message.Value, true
	}
}
