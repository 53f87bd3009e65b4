package tablestore

// The Commit ability (driver.Abilities.Commit and CheckCommit): several
// writes as one entity group transaction, and the reading of its
// multipart answer. The typed Batch API is in batch.go.

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

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/azerr"
	"github.com/etagstore/etagstore/internal/azretry"
)

// actionNames name the actions of a transaction in errors, by the
// Table operation they are.
var actionNames = map[aztables.TransactionType]string{
	aztables.TransactionTypeAdd: "create", aztables.TransactionTypeUpdateReplace: "replace",
	aztables.TransactionTypeUpdateMerge: "merge", aztables.TransactionTypeInsertReplace: "upsert",
	aztables.TransactionTypeInsertMerge: "upsert-merge", aztables.TransactionTypeDelete: "delete",
}

// kindTypes are the Table operations of a Batch's actions.
var kindTypes = map[access.Kind]aztables.TransactionType{
	access.Create: aztables.TransactionTypeAdd, access.Replace: aztables.TransactionTypeUpdateReplace,
	access.Merge: aztables.TransactionTypeUpdateMerge, access.Upsert: aztables.TransactionTypeInsertReplace,
	access.UpsertMerge: aztables.TransactionTypeInsertMerge, access.Delete: aztables.TransactionTypeDelete,
}

// checkCommit is Abilities.CheckCommit: the rules of an entity group
// transaction that need no request — 1 to MaxBatchActions actions, one
// partition, each row once.
func (b *Backend) checkCommit(actions []driver.Action) error {
	n := len(actions) // and the fence record each tombstone or fenced create writes (tombstone.go)
	for _, a := range actions {
		if tombstone(a) || fencedCreate(a) {
			n++
		}
	}
	if len(actions) == 0 || n > MaxBatchActions {
		return fmt.Errorf("%w: tablestore: a batch holds 1 to %d actions (fence records included), this one %d", driver.ErrInvalidInput, MaxBatchActions, n)
	}
	var partition string
	rows := make(map[string]bool, len(actions))
	for i, a := range actions {
		pk, rk, err := b.splitItem(a.Key)
		if err == nil && i > 0 && pk != partition {
			err = fmt.Errorf("%w: partition %q differs from the batch's %q", driver.ErrInvalidInput, pk, partition)
		}
		if err == nil && rows[rk] {
			err = fmt.Errorf("%w: row %q appears twice in the batch", driver.ErrInvalidInput, rk)
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
// out. A tombstone or a fenced create carries the fence record of its key
// (tombstone.go); a create whose record another fenced write changed
// meanwhile is read and sent again. The Store has checked the actions
// with checkCommit (CheckCommit) before any request; the service refuses
// what breaks its rules anyway.
func (b *Backend) commit(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
	for {
		etags, err := b.commitOnce(ctx, actions)
		if !errors.Is(err, errRecordRaced) {
			return etags, err
		}
		if err := ctx.Err(); err != nil { // raced every time: contention is bounded by time
			return nil, err
		}
	}
}

// commitOnce is one try of commit.
func (b *Backend) commitOnce(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
	tx := make([]aztables.TransactionAction, 0, len(actions))
	sent := make([]int, 0, len(actions)) // the action each transaction action is (-1-i: the record of action i)
	for i, a := range actions {
		if a.Check && a.Write.Cond.Kind == driver.CondCreate {
			continue
		}
		if tombstone(a) {
			a.Write.Meta = "" // the token goes to the record
		}
		act, err := b.transactionAction(a)
		if err != nil {
			return nil, &driver.ActionError{Index: i, Err: err}
		}
		tx, sent = append(tx, act), append(sent, i)
		rec, ok, err := b.recordAction(ctx, actions[i])
		if err != nil {
			return nil, &driver.ActionError{Index: i, Err: err}
		}
		if ok {
			tx, sent = append(tx, rec), append(sent, -1-i)
		}
	}
	etags := make([]driver.ETag, len(actions))
	if len(tx) == 0 {
		return etags, nil
	}
	var resp *http.Response
	_, err := b.client.SubmitTransaction(policy.WithCaptureResponse(azretry.NoRetry(ctx), &resp), tx, nil)
	if err == nil {
		driver.Sent(ctx, nil)
		for j, etag := range batchETags(resp) {
			if j < len(sent) && sent[j] >= 0 && !actions[sent[j]].Delete {
				etags[sent[j]] = etag
			}
		}
		return etags, nil
	}
	return nil, driver.Sent(ctx, commitFailure(err, actions, sent))
}

// commitFailure is the error of a transaction of actions (sent[j] is the
// action its j-th transaction action was) that failed with err: a refusal
// names the action the service named, in an *driver.ActionError; a
// throttled transaction is marked driver.ErrNotApplied.
func commitFailure(err error, actions []driver.Action, sent []int) error {
	if !refused(err) {
		return mapError("batch", actions[0].Key, err)
	}
	index, err := batchFailure(err, func(j int) (string, string) {
		if j < 0 || j >= len(sent) {
			return "batch", ""
		}
		if i := sent[j]; i < 0 {
			return fmt.Sprintf("batch action %d: its fence record", -1-i), actions[-1-i].Key
		}
		a, name := actions[sent[j]], "check"
		if !a.Check {
			name = actionNames[actionType(a)]
		}
		return fmt.Sprintf("batch action %d: %s", sent[j], name), a.Key
	})
	if errors.Is(err, driver.ErrNotApplied) {
		return err
	}
	if index >= 0 && index < len(sent) {
		if index = sent[index]; index < 0 { // a record a fenced create read changed meanwhile
			return fmt.Errorf("%w: %w", errRecordRaced, err)
		}
	}
	return &driver.ActionError{Index: index, Err: err}
}

// batchETags reads the ETag of each change-set response of a committed
// transaction, in the order of its actions ("" where a response has none);
// nil when the response cannot be read.
func batchETags(resp *http.Response) []driver.ETag {
	if resp == nil {
		return nil
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return nil
	}
	var etags []driver.ETag
	eachResponse(resp.Header.Get("Content-Type"), body, func(r *http.Response) bool {
		etags = append(etags, driver.ETag(r.Header.Get("ETag")))
		return true
	})
	return etags
}

// transactionAction is a as an action of an entity group transaction; it
// fails, sending nothing, on what the service would refuse.
func (b *Backend) transactionAction(a driver.Action) (aztables.TransactionAction, error) {
	pk, rk, err := b.splitItem(a.Key)
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
	data, mode := a.Write.Payload() // a read-modify-write's changes alone, as a merge
	a.Write.Mode = mode
	if a.Delete || a.Check {
		data = []byte("{}") // a check merges no properties: only the ETag changes
	}
	body, err := entity(pk, rk, a.Write.Meta, data) // no bookkeeping property without Meta
	if err != nil {
		return aztables.TransactionAction{}, err
	}
	act := aztables.TransactionAction{Entity: body, ActionType: actionType(a)}
	if act.ActionType == "" {
		return aztables.TransactionAction{}, fmt.Errorf("%w: tablestore: a create cannot merge", driver.ErrInvalidInput)
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

// batchFailure reads a failed transaction. The SDK reports it as a
// *azcore.ResponseError with StatusCode 202 and no ErrorCode; the inner
// response in the multipart body holds the real status and error code, and
// the message starts with the failing action's index ("2:The update
// condition…"). It returns that index (-1 if unknown) and the error mapped
// to etagstore's sentinels, the service's answer naming the action as name
// says (its index in the transaction; -1: the transaction as a whole).
func batchFailure(err error, name func(index int) (op, key string)) (int, error) {
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
	op, key := name(index)
	return index, mapErrorDetail(op, key, strings.TrimSpace(indexPrefix.ReplaceAllString(first, "")), inner)
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
