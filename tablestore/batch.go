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
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/azerr"
	"github.com/etagstore/etagstore/internal/azretry"
	"github.com/etagstore/etagstore/internal/telemetry"
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
// Backend (otherwise Submit fails with etagstore.ErrInvalidInput).
func NewBatch[T any](s *etagstore.Store[T]) *Batch[T] {
	b := &Batch[T]{store: s}
	b.backend, b.err = tableOf(s, "NewBatch")
	return b
}

func (b *Batch[T]) add(a batchAction[T]) *Batch[T] {
	if b.err == nil && (a.op == access.Replace || a.op == access.Merge || a.op == access.Delete) && a.etag == "" {
		b.err = fmt.Errorf("%w: batch action %d (%s %q)", etagstore.ErrETagRequired, len(b.actions), opNames[a.op], a.key)
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
func (b *Batch[T]) Replace(d etagstore.Doc[T]) *Batch[T] {
	return b.add(batchAction[T]{op: access.Replace, key: d.Key, etag: d.ETag, value: d.Value, extra: d.Extra})
}

// Merge writes only the named properties of d.Value (all if none are
// named) if the entity's ETag is still d.ETag; other properties keep their
// stored values.
func (b *Batch[T]) Merge(d etagstore.Doc[T], properties ...string) *Batch[T] {
	return b.add(batchAction[T]{op: access.Merge, key: d.Key, etag: d.ETag, value: d.Value, fields: properties})
}

// Upsert inserts or replaces v under key with no concurrency check.
func (b *Batch[T]) Upsert(key string, v T) *Batch[T] {
	return b.add(batchAction[T]{op: access.Upsert, key: key, value: v})
}

// UpsertMerge inserts v under key or merges the named properties (all if
// none are named) into the stored entity, with no concurrency check.
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

	named string // Err's text, naming the action in the service's answer ("" if it holds none)
}

// Error is one line: the action's error, naming the action where the
// service's answer is printed, else followed by it.
func (e *BatchError) Error() string {
	if e.named != "" {
		return e.named
	}
	return fmt.Sprintf("%v (batch action %d: %s %q)", e.Err, e.Index, e.Op, e.Key)
}

// name puts the action into the service's answer the error holds, if it
// holds one about the batch as a whole.
func (e *BatchError) name() {
	var se *azerr.ServiceError
	if e.Index < 0 || !errors.As(e.Err, &se) || se.Op != "batch" || se.Key != "" {
		return
	}
	before := se.Error()
	se.Op, se.Key = fmt.Sprintf("batch action %d: %s", e.Index, e.Op), e.Key
	e.named = strings.Replace(e.Err.Error(), before, se.Error(), 1)
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
	w := access.Write[T]{Op: telemetry.OpBatch, Actions: make([]access.Action[T], len(b.actions))}
	for i, a := range b.actions {
		act := access.Action[T]{Kind: a.op, Key: a.key, ETag: a.etag, Mine: a.value, Extra: a.extra}
		if a.op != access.Delete {
			act.Encode = encodeProperties(b.store, a.value, a.fields)
		}
		w.Actions[i] = act
	}
	etags, err := b.store.DeliverWrite(ctx, w)
	var ae *driver.ActionError
	if errors.As(err, &ae) {
		be := &BatchError{Index: ae.Index, Err: ae.Err}
		if ae.Index >= 0 && ae.Index < len(b.actions) {
			be.Op, be.Key = opNames[b.actions[ae.Index].op], b.actions[ae.Index].key
		}
		be.name()
		return nil, be
	}
	return etags, err
}

// opNames name the actions in a *BatchError.
var opNames = map[access.Kind]string{access.Create: "create", access.Replace: "replace", access.Merge: "merge",
	access.Upsert: "upsert", access.UpsertMerge: "upsert-merge", access.Delete: "delete"}

// checkCommit is Abilities.CheckCommit: the rules of an entity group
// transaction that need no request — 1 to MaxBatchActions actions, one
// partition, each row once.
func (b *Backend) checkCommit(actions []driver.Action) error {
	if len(actions) == 0 || len(actions) > MaxBatchActions {
		return fmt.Errorf("%w: tablestore: a batch holds 1 to %d actions, this one %d", etagstore.ErrInvalidInput, MaxBatchActions, len(actions))
	}
	var partition string
	rows := make(map[string]bool, len(actions))
	for i, a := range actions {
		pk, rk, err := b.split(a.Key)
		if err == nil && i > 0 && pk != partition {
			err = fmt.Errorf("%w: partition %q differs from the batch's %q", etagstore.ErrInvalidInput, pk, partition)
		}
		if err == nil && rows[rk] {
			err = fmt.Errorf("%w: row %q appears twice in the batch", etagstore.ErrInvalidInput, rk)
		}
		if err != nil {
			return &driver.ActionError{Index: i, Err: err}
		}
		partition, rows[rk] = pk, true
	}
	return nil
}

// commit is Abilities.Commit: the actions as one entity group transaction,
// with the SDK's retries off (a blind retry of a committed transaction
// would fail on its own writes). It returns each action's new ETag, read
// from the transaction's response. A refusal is an *driver.ActionError
// naming the action the service named; a throttled transaction is marked
// driver.ErrNotApplied. A check that a key is absent (driver.Action.Check
// with CondCreate) cannot be sent without creating the entity: it is left
// out. The Store has checked the actions with checkCommit (CheckCommit)
// before any request; the service refuses what breaks its rules anyway.
func (b *Backend) commit(ctx context.Context, actions []driver.Action) ([]etagstore.ETag, error) {
	tx := make([]aztables.TransactionAction, 0, len(actions))
	sent := make([]int, 0, len(actions)) // the action each transaction action is
	for i, a := range actions {
		if a.Check && a.Write.Cond.Kind == driver.CondCreate {
			continue
		}
		act, err := b.transactionAction(a)
		if err != nil {
			return nil, &driver.ActionError{Index: i, Err: err}
		}
		tx, sent = append(tx, act), append(sent, i)
	}
	etags := make([]etagstore.ETag, len(actions))
	if len(tx) == 0 {
		return etags, nil
	}
	var resp *http.Response
	_, err := b.client.SubmitTransaction(policy.WithCaptureResponse(azretry.NoRetry(ctx), &resp), tx, nil)
	if err == nil {
		for j, etag := range batchETags(resp) {
			if j < len(sent) && !actions[sent[j]].Delete {
				etags[sent[j]] = etag
			}
		}
		return etags, nil
	}
	if refused(err) {
		index, err := batchFailure(err)
		if errors.Is(err, driver.ErrNotApplied) {
			return nil, err
		}
		if index >= 0 && index < len(sent) {
			index = sent[index]
		}
		return nil, &driver.ActionError{Index: index, Err: err}
	}
	return nil, mapError("batch", actions[0].Key, err)
}

// batchETags reads the ETag of each change-set response of a committed
// transaction, in the order of its actions ("" where a response has none);
// nil when the response cannot be read.
func batchETags(resp *http.Response) []etagstore.ETag {
	if resp == nil {
		return nil
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return nil
	}
	var etags []etagstore.ETag
	eachResponse(resp.Header.Get("Content-Type"), body, func(r *http.Response) bool {
		etags = append(etags, etagstore.ETag(r.Header.Get("ETag")))
		return true
	})
	return etags
}

// transactionAction is a as an action of an entity group transaction; it
// fails, sending nothing, on what the service would refuse.
func (b *Backend) transactionAction(a driver.Action) (aztables.TransactionAction, error) {
	pk, rk, err := b.split(a.Key)
	if err != nil {
		return aztables.TransactionAction{}, err
	}
	if err := a.Write.Cond.Check(); err != nil {
		return aztables.TransactionAction{}, err
	}
	if a.Write.Cond.Kind == driver.CondIfMatch {
		if err := checkETag(a.Write.Cond.ETag); err != nil {
			return aztables.TransactionAction{}, err // a conflict, refused before sending, as for Write
		}
	}
	data := a.Write.Data
	if a.Delete || a.Check {
		data = []byte("{}") // a check merges no properties: only the ETag changes
	}
	body, err := entity(pk, rk, a.Write.Meta, data) // no bookkeeping property without Meta
	if err != nil {
		return aztables.TransactionAction{}, err
	}
	act := aztables.TransactionAction{Entity: body, ActionType: actionType(a)}
	if act.ActionType == "" {
		return aztables.TransactionAction{}, fmt.Errorf("%w: tablestore: a create cannot merge", etagstore.ErrInvalidInput)
	}
	if a.Delete || a.Write.Cond.Kind == driver.CondIfMatch {
		etag := azcore.ETag(a.Write.Cond.ETag) // never nil: nil would mean "*" or an upsert
		act.IfMatch = &etag
	}
	return act, nil
}

// actionType is the Table operation of a ("" for a merging create).
func actionType(a driver.Action) aztables.TransactionType {
	merge := a.Write.Mode == driver.ModeMerge || a.Check
	switch {
	case a.Delete:
		return aztables.TransactionTypeDelete
	case a.Write.Cond.Kind == driver.CondCreate && !merge:
		return aztables.TransactionTypeAdd
	case a.Write.Cond.Kind == driver.CondNone && merge:
		return aztables.TransactionTypeInsertMerge
	case a.Write.Cond.Kind == driver.CondNone:
		return aztables.TransactionTypeInsertReplace
	case a.Write.Cond.Kind == driver.CondIfMatch && merge:
		return aztables.TransactionTypeUpdateMerge
	case a.Write.Cond.Kind == driver.CondIfMatch:
		return aztables.TransactionTypeUpdateReplace
	}
	return ""
}

// refused reports whether the service answered a request with a refusal
// (HTTP 4xx; a failed transaction's 202; a 503 ServerBusy), so that it was
// not applied. No answer, or another 5xx, may hide a request that was
// applied: the engine then reads to find out.
func refused(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && (re.StatusCode == http.StatusAccepted || re.StatusCode >= 400 && re.StatusCode < 500 ||
		errors.Is(azerr.ServerBusy(re.StatusCode, re.ErrorCode, err), driver.ErrNotApplied))
}

// selectProperties keeps only the named properties of an
// entity-properties object, with their type annotations and, for a field
// split across properties, its parts (see EntityCodec); no names keeps
// all. A merge of a split field writes its count and every part, so
// readers never join parts of an older value.
func selectProperties(data []byte, names []string) ([]byte, error) {
	if len(names) == 0 {
		return data, nil
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = false
	}
	out := append(make([]byte, 0, len(data)), '{')
	err := eachMember(data, func(name, _, member []byte) bool {
		base, _, _ := bytes.Cut(name, []byte("@"))
		if field, _, ok := partOf(base); ok {
			base = field
		}
		if _, ok := want[string(base)]; ok {
			want[string(base)] = true
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, member...)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("tablestore: entity is not a JSON object: %w", err)
	}
	for _, n := range names {
		if !want[n] {
			return nil, fmt.Errorf("%w: tablestore: no property %q in the document", etagstore.ErrInvalidInput, n)
		}
	}
	return append(out, '}'), nil
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
	// The message's first line without its index: "The specified entity already exists."
	first, _, _ := strings.Cut(strings.TrimSpace(message), "\n")
	return index, mapErrorDetail("batch", "", strings.TrimSpace(indexPrefix.ReplaceAllString(first, "")), inner)
}

var indexPrefix = regexp.MustCompile(`^\s*(\d+):`)

// innerFailure finds the first inner response with a status of 400 or more
// in a (possibly nested) multipart/mixed batch response.
func innerFailure(contentType string, body []byte) (status int, code, message string, ok bool) {
	eachResponse(contentType, body, func(resp *http.Response) bool {
		if resp.StatusCode < 400 {
			return true
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
		status, code, message, ok = resp.StatusCode, e.Err.Code, e.Err.Message.Value, true
		return false
	})
	return status, code, message, ok
}

// eachResponse calls yield with each inner HTTP response of a (possibly
// nested) multipart/mixed batch response, in order, until yield returns
// false. It reports whether yield asked to stop.
func eachResponse(contentType string, body []byte, yield func(*http.Response) bool) bool {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["boundary"] == "" {
		return false
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			return false
		}
		data, err := io.ReadAll(part)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return false
		}
		ct := part.Header.Get("Content-Type")
		if strings.HasPrefix(ct, "multipart/") {
			if eachResponse(ct, data, yield) {
				return true
			}
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
		if err == nil && !yield(resp) {
			return true
		}
	}
}
