package tablestore

// Tombstones (driver.ModeTombstone): a fenced delete keeps the key's
// fencing token, so that a stale holder's fenced create of the key is
// refused. A table keeps it in a record entity beside the key, in the
// key's partition, written in the same entity group transaction as the
// delete; a fenced create reads it first and commits its insert with the
// record conditioned on what it read (its ETag, or its absence by
// inserting it), raising it to the create's token. So a create and a
// fenced delete of one key are ordered by the record, at one request each
// (the create also reads the record: two in all). The record's RowKey
// starts with U+FFFF, which no key may start with (ValidateKey) and which
// every listing skips. It stays when the key is created again, and costs
// an entity of about 100 bytes per key ever deleted or created under a
// fence.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore/driver"
)

// recordPrefix starts the RowKey of every record a table keeps beside a
// key (reserved: see ValidateKey).
const recordPrefix = "\uFFFF"

// fenceProperty is the record's property holding the kept token.
const fenceProperty = "Fence"

// errRecordRaced is a commit's refusal of a record a fenced create read:
// another fenced write of the key changed it meanwhile.
var errRecordRaced = errors.New("tablestore: the key's fence record changed")

// recordRow is the RowKey of the fence record of row rk: rk itself after
// the prefix, or its SHA-256 when that would be too long for a key.
func recordRow(rk string) string {
	row := recordPrefix + "f." + rk
	if 2*len(utf16.Encode([]rune(row))) <= maxKeyBytes {
		return row
	}
	sum := sha256.Sum256([]byte(rk))
	return recordPrefix + "h." + hex.EncodeToString(sum[:])
}

// isRecord reports whether the entity of key is a record, not a document.
func (b *Backend) isRecord(key string) bool {
	if b.opts.Partition == "" {
		_, key, _ = strings.Cut(key, "/")
	}
	return strings.HasPrefix(key, recordPrefix)
}

// tombstone reports whether a is a fenced delete that keeps its token.
func tombstone(a driver.Action) bool { return a.Delete && a.Write.Mode == driver.ModeTombstone }

// fencedCreate reports whether a creates its key carrying a fencing token.
func fencedCreate(a driver.Action) bool {
	return !a.Delete && !a.Check && a.Write.Cond.Kind == driver.CondCreate && driver.FenceOf(a.Write.Meta) > 0
}

// recordAction is the transaction action, if a needs one, that keeps a's
// token in the record of a's key: an upsert for a tombstone; for a fenced
// create, the record read raised to the create's token, conditioned on
// its ETag (or inserted, when there was none). A create carrying a lower
// token than the record's matches driver.ErrFenced, and nothing is sent.
func (b *Backend) recordAction(ctx context.Context, a driver.Action) (act aztables.TransactionAction, ok bool, err error) {
	if !tombstone(a) && !fencedCreate(a) {
		return act, false, nil
	}
	pk, rk, err := b.splitItem(a.Key)
	if err != nil {
		return act, false, err
	}
	token := driver.FenceOf(a.Write.Meta)
	act.ActionType = aztables.TransactionTypeInsertReplace
	if fencedCreate(a) {
		kept, etag, err := b.readRecord(ctx, pk, rk)
		switch {
		case err != nil:
			return act, false, err
		case kept > token:
			return act, false, fmt.Errorf("%w: %q was deleted under fencing token %d, the create carries %d", driver.ErrFenced, a.Key, kept, token)
		case etag == "":
			act.ActionType = aztables.TransactionTypeAdd
		default:
			act.ActionType, act.IfMatch = aztables.TransactionTypeUpdateReplace, &etag
		}
	}
	act.Entity, err = json.Marshal(map[string]string{"PartitionKey": pk, "RowKey": recordRow(rk),
		fenceProperty: strconv.FormatInt(token, 10), fenceProperty + "@odata.type": "Edm.Int64"})
	return act, true, err
}

// readRecord reads the token the record of (pk, rk) keeps and its ETag
// ("" and 0 when there is none).
func (b *Backend) readRecord(ctx context.Context, pk, rk string) (int64, azcore.ETag, error) {
	resp, err := b.client.GetEntity(ctx, pk, recordRow(rk), nil)
	err = driver.Sent(ctx, mapReadError("read fence record", b.key(pk, rk), err))
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return 0, "", nil
	case err != nil && (driver.SentinelOf(err) != nil || ctx.Err() != nil):
		return 0, "", err
	case err != nil: // nothing was sent yet: never an unknown outcome
		return 0, "", fmt.Errorf("%w: %w", driver.ErrNotApplied, err)
	}
	var rec struct {
		Fence json.Number
	}
	if err := json.Unmarshal(resp.Value, &rec); err != nil {
		return 0, "", fmt.Errorf("tablestore: the fence record of %q: %w", b.key(pk, rk), err)
	}
	token, _ := strconv.ParseInt(strings.Trim(rec.Fence.String(), `"`), 10, 64)
	return token, resp.ETag, nil
}

// writeRecorded is Write of a tombstone or a fenced create: a commit of
// its action with the record it implies, its refusal as a Write's.
func (b *Backend) writeRecorded(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	etags, err := b.commit(ctx, []driver.Action{{Key: key, Delete: w.Mode == driver.ModeTombstone, Write: w}})
	var ae *driver.ActionError
	if errors.As(err, &ae) {
		return "", ae.Err
	}
	if err != nil {
		return "", err
	}
	return etags[0], nil
}
