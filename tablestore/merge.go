package tablestore

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azerr"
	"github.com/etagstore/etagstore/internal/azretry"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/outcome"
)

// Merges and batches write entities themselves, outside the Store's
// engine, and keep its bookkeeping (MetaProperty, see internal/meta) the way
// a Store write does, so that the Store can still resolve the writes around
// them by reading:
//
//   - a write that starts a new history (batch Create, Replace, Upsert)
//     stores meta.Fresh with a new write id, as Store.Create, Replace and
//     Upsert do;
//   - a write conditioned on a version it read (Merge, and the actions of a
//     fenced batch) stores that version's bookkeeping extended by a new
//     write id (meta.Then), with the higher fencing token;
//   - a merge that did not read (batch Merge and UpsertMerge, UpsertMerge)
//     does not send the property at all: Merge Entity leaves properties it
//     does not name alone, so the stored ids, lineage and fence are kept,
//     and the Store reads the new ETag as "changed without a new write".
//
// A write whose answer was lost is resolved by reading, with the rules of
// the Store's own resolver: its id (or the history it started) is stored →
// committed; the version it was conditioned on is still current → not
// landed, send it again; the history went on without it → not applied;
// otherwise the outcome is unknown (*etagstore.OutcomeUnknownError).

// keepIDs is how many write ids a merge keeps at least: the Store's
// default window. A document keeping more (Options.KeepWriteIDs) keeps its
// own window.
const keepIDs = 16

// maxTries bounds the requests one Merge or Submit sends: tries again of a
// request that has not landed, and, for a Merge with ETagAny, new attempts
// after losing a race.
const maxTries = 8

// extend is the bookkeeping of a write over the version whose bookkeeping
// is stored, with a new write id and fencing token fence (0: none).
func extend(stored meta.Meta, fence int64) meta.Meta {
	return stored.Then(meta.NewID(), max(stored.Count(), keepIDs), fence)
}

// refused reports whether the service answered a request with a refusal
// (HTTP 4xx; a failed transaction's 202; a 503 ServerBusy, marked
// driver.ErrNotApplied), so that it was not applied. No answer, or another
// 5xx, may hide a request that was applied: the caller then reads to find
// out. It is asked only of errors of a request that was
// sent (mergeEntity, SubmitTransaction): every check made before sending
// is made, and answered, before.
func refused(err error) bool {
	if errors.Is(err, driver.ErrNotApplied) {
		return true
	}
	var re *azcore.ResponseError
	return errors.As(err, &re) && (re.StatusCode == http.StatusAccepted || re.StatusCode >= 400 && re.StatusCode < 500 ||
		errors.Is(azerr.ServerBusy(re.StatusCode, re.ErrorCode, err), driver.ErrNotApplied))
}

// mergeEntity sends w to key as a Merge Entity (CondIfMatch) or an Insert
// or Merge Entity (CondNone), with the SDK's retries off. Its errors are
// those of the request alone (mapped by mapError): the key, the properties
// and the bookkeeping are checked before (prepareMerge, Merge).
func (b *Backend) mergeEntity(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	pk, rk, _ := b.split(key)
	body, err := entity(pk, rk, w.Meta, w.Data)
	if err != nil {
		return "", err // checked by prepareMerge: not reached
	}
	ctx = azretry.NoRetry(ctx)
	var etag azcore.ETag
	if w.Cond.Kind == driver.CondIfMatch {
		ifMatch := azcore.ETag(w.Cond.ETag) // never nil: nil would mean "*"
		var resp aztables.UpdateEntityResponse
		resp, err = b.client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &ifMatch, UpdateMode: aztables.UpdateModeMerge})
		etag = resp.ETag
	} else {
		var resp aztables.UpsertEntityResponse
		resp, err = b.client.UpsertEntity(ctx, body, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeMerge})
		etag = resp.ETag
	}
	if err != nil {
		return "", mapError("merge", key, err)
	}
	return etagstore.ETag(etag), nil
}

// Merge writes only the named properties of d.Value (all of its properties
// if none are named) into the stored entity if its ETag is still d.ETag
// (Merge Entity); properties not named keep their stored values. It returns
// the entity's new ETag.
//
// Merge reads the entity first and sends the merge with If-Match of the
// version read, carrying that version's bookkeeping extended by a write id
// of its own (write ids, lineage and fencing token are kept). So:
//
//   - An empty d.ETag matches etagstore.ErrETagRequired and nothing is sent;
//     a stale ETag returns a *etagstore.ConflictError[T]; a missing entity
//     matches etagstore.ErrNotFound.
//   - ETagAny merges into whatever version is stored: a version that
//     changes between the read and the merge is read again and merged into.
//   - A fenced context (etagstore.WithFence) is checked against the version
//     read, atomically (the merge is conditioned on that version): a higher
//     stored token matches etagstore.ErrFenced; the token is recorded.
//   - A merge whose answer was lost is resolved by reading, like a Store
//     write: found committed, it succeeds (with an empty ETag when later
//     writes followed it); not landed, it is sent again; where no read can
//     tell, the error is an *etagstore.OutcomeUnknownError.
func Merge[T any](ctx context.Context, s *etagstore.Store[T], d etagstore.Doc[T], properties ...string) (etagstore.ETag, error) {
	if d.ETag == "" {
		return "", fmt.Errorf("%w: Merge %q", etagstore.ErrETagRequired, d.Key)
	}
	b, data, err := prepareMerge(s, d.Key, d.Value, properties)
	if err != nil {
		return "", err
	}
	fence, fenced := etagstore.FenceFrom(ctx)
	var base driver.Item
	read := true
	for attempt := 1; ; attempt++ {
		if read {
			if base, err = b.Read(ctx, d.Key); err != nil {
				return "", err
			}
		}
		if d.ETag != etagstore.ETagAny && base.ETag != d.ETag {
			return "", conflictWith(s, base, d.ETag, d.Value, attempt)
		}
		stored := meta.Parse(base.Meta)
		if fenced && stored.Fence > fence {
			return "", fmt.Errorf("%w: %q carries fencing token %d, the merge only %d", etagstore.ErrFenced, d.Key, stored.Fence, fence)
		}
		m := extend(stored, fence)
		if len(m.String()) > driver.MaxMetaLen {
			return "", fmt.Errorf("%w: %q: bookkeeping of %d bytes", etagstore.ErrTooLarge, d.Key, len(m.String()))
		}
		w := driver.Write{Data: data, Cond: driver.IfMatch(base.ETag), Meta: m.String()}
		etag, moved, err := sendMerge(ctx, b, d.Key, w, m)
		switch {
		case err == nil:
			return etag, nil
		case d.ETag == etagstore.ETagAny && attempt < maxTries && moved != nil:
			base, read = *moved, false // the history went on without it: merge into the new version
			continue
		case d.ETag == etagstore.ETagAny && attempt < maxTries && errors.Is(err, etagstore.ErrConflict):
			read = true // lost a race: read again
			continue
		case moved != nil:
			return "", conflictWith(s, *moved, d.ETag, d.Value, attempt)
		case errors.Is(err, etagstore.ErrConflict):
			return "", conflict(ctx, s, d.Key, d.ETag, d.Value, err)
		}
		return "", err
	}
}

// sendMerge sends the merge w, whose bookkeeping is m, until its fate is
// known. It returns the new ETag ("" when the merge was found committed with
// later writes after it); or, when a read proves it was not applied, the
// version read (moved) with an error matching etagstore.ErrConflict; or a
// refusal of the first try as the service gave it; or an
// *etagstore.OutcomeUnknownError.
func sendMerge(ctx context.Context, b *Backend, key string, w driver.Write, m meta.Meta) (etag etagstore.ETag, moved *driver.Item, err error) {
	var lost error // the failure that left a try unsettled
	for try := 1; ; try++ {
		if err := ctx.Err(); err != nil { // nothing sent now
			if lost != nil {
				return "", nil, &etagstore.OutcomeUnknownError{Op: "Merge", Key: key, Cause: errors.Join(lost, err)}
			}
			return "", nil, err
		}
		etag, err := b.mergeEntity(ctx, key, w)
		switch {
		case err == nil:
			return etag, nil, nil
		case lost == nil && refused(err):
			return "", nil, err // a definite answer to the only try
		case lost == nil:
			lost = err
		}
		it, rerr := b.Read(ctx, key)
		if rerr != nil {
			return "", nil, &etagstore.OutcomeUnknownError{Op: "Merge", Key: key, Cause: errors.Join(lost, rerr)}
		}
		switch outcome.Resolve(outcome.Sent{IfMatch: string(w.Cond.ETag), Meta: m}, observed(it, nil)) {
		case outcome.Committed:
			if meta.Parse(it.Meta).LastID() == m.LastID() {
				return it.ETag, nil, nil
			}
			return "", nil, nil // committed; later writes followed it
		case outcome.NotLanded:
			if try < maxTries {
				continue // send it again
			}
		case outcome.NotApplied:
			return "", &it, fmt.Errorf("%w: %q moved on", etagstore.ErrConflict, key)
		}
		return "", nil, &etagstore.OutcomeUnknownError{Op: "Merge", Key: key, Cause: lost}
	}
}

// UpsertMerge inserts v under key, or merges the named properties of v (all
// if none are named) into the stored entity with no concurrency check
// (Insert or Merge Entity): the documented bypass, like Store.Upsert. It
// sends no bookkeeping, so the stored write ids, lineage and fencing token
// are kept (an inserted entity has none).
//
// A fenced context (etagstore.WithFence) matches etagstore.ErrInvalidInput
// and nothing is sent: UpsertMerge checks nothing and cannot honour a
// fencing token (use Merge). Carrying no write id, a merge whose answer was
// lost cannot be told apart from a later writer's: it is an
// *etagstore.OutcomeUnknownError.
func UpsertMerge[T any](ctx context.Context, s *etagstore.Store[T], key string, v T, properties ...string) (etagstore.ETag, error) {
	if _, fenced := etagstore.FenceFrom(ctx); fenced {
		return "", fmt.Errorf("%w: UpsertMerge %q checks nothing and cannot honour a fencing token; use Merge", etagstore.ErrInvalidInput, key)
	}
	b, data, err := prepareMerge(s, key, v, properties)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	etag, err := b.mergeEntity(ctx, key, driver.Write{Data: data, Cond: driver.Cond{Kind: driver.CondNone}})
	if err != nil && !refused(err) {
		return "", &etagstore.OutcomeUnknownError{Op: "UpsertMerge", Key: key, Cause: err}
	}
	return etag, err
}

// prepareMerge checks everything a merge of v under key can fail on before
// it is sent, and returns the table Backend and the properties to send.
func prepareMerge[T any](s *etagstore.Store[T], key string, v T, properties []string) (*Backend, []byte, error) {
	b, err := tableOf(s, "merge")
	if err != nil {
		return nil, nil, err
	}
	if err := driver.CheckKey(key); err != nil {
		return nil, nil, err
	}
	pk, rk, err := b.split(key)
	if err != nil {
		return nil, nil, err
	}
	data, err := s.Codec().Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	if data, err = selectProperties(data, properties); err != nil {
		return nil, nil, err
	}
	if _, err := entity(pk, rk, "", data); err != nil {
		return nil, nil, err
	}
	return b, data, nil
}

// conflict turns a 412 on key into a *etagstore.ConflictError[T] holding
// the stored document; a document that is gone matches etagstore.ErrNotFound.
func conflict[T any](ctx context.Context, s *etagstore.Store[T], key string, held etagstore.ETag, mine T, cause error) error {
	theirs, err := s.Get(ctx, key)
	if errors.Is(err, etagstore.ErrNotFound) {
		return err
	}
	if err != nil {
		return cause
	}
	return &etagstore.ConflictError[T]{Key: key, ETag: held, Mine: mine, Theirs: theirs, Attempts: 1}
}

// conflictWith is the *etagstore.ConflictError[T] of a write holding held
// that found it, the current version.
func conflictWith[T any](s *etagstore.Store[T], it driver.Item, held etagstore.ETag, mine T, attempts int) error {
	theirs := etagstore.Doc[T]{Key: it.Key, ETag: it.ETag}
	if err := s.Codec().Unmarshal(it.Data, &theirs.Value); err != nil {
		return fmt.Errorf("tablestore: decode %q: %w", it.Key, err)
	}
	return &etagstore.ConflictError[T]{Key: it.Key, ETag: held, Mine: mine, Theirs: theirs, Attempts: attempts}
}
