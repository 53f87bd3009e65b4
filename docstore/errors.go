package docstore

import (
	"context"
	"errors"

	"gocloud.dev/gcerrors"

	"github.com/etagstore/etagstore"
)

// codes maps etagstore's sentinels to gcerrors codes, in the order they
// are tried. It is the one place where the driver classifies errors.
var codes = []struct {
	sentinel error
	code     gcerrors.ErrorCode
}{
	{etagstore.ErrNotFound, gcerrors.NotFound},
	{etagstore.ErrStorageNotFound, gcerrors.NotFound}, // the collection itself (its table or container) is missing
	{etagstore.ErrExists, gcerrors.AlreadyExists},
	{etagstore.ErrConflict, gcerrors.FailedPrecondition},
	{etagstore.ErrFenced, gcerrors.FailedPrecondition},
	{etagstore.ErrLocked, gcerrors.FailedPrecondition},
	{etagstore.ErrLockLost, gcerrors.FailedPrecondition},
	{etagstore.ErrETagRequired, gcerrors.InvalidArgument},
	{etagstore.ErrInvalidKey, gcerrors.InvalidArgument},
	{etagstore.ErrInvalidInput, gcerrors.InvalidArgument},
	{etagstore.ErrTooLarge, gcerrors.ResourceExhausted},
	{etagstore.ErrOutcomeUnknown, gcerrors.Unknown},
	{errors.ErrUnsupported, gcerrors.Unimplemented},
	{context.Canceled, gcerrors.Canceled},
	{context.DeadlineExceeded, gcerrors.DeadlineExceeded},
}

// ErrorCode classifies err, an error of the collection: by the etagstore
// sentinel it matches, otherwise as the Go CDK classifies it (the
// docstore/driver codec's errors), otherwise Unknown.
func (c *collection) ErrorCode(err error) gcerrors.ErrorCode {
	for _, m := range codes {
		if errors.Is(err, m.sentinel) {
			return m.code
		}
	}
	return gcerrors.Code(err)
}

// ErrorAs is errors.As: it reaches *etagstore.OutcomeUnknownError and the
// Azure SDK's *azcore.ResponseError in the chain.
func (c *collection) ErrorAs(err error, i any) bool { return errors.As(err, i) }
