package etagstore

import (
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/groupcommit"
)

// This file holds every sentinel and error type of the package but the
// two a write's conflict carries, ConflictError and MergeError
// (conflict.go). Package driver declares the sentinels, which backends
// return; they are documented here.

// Sentinel errors. Every failure of a Store matches exactly one of them
// with errors.Is, with four exceptions passed through as they are: the
// context's error when nothing was sent (or nothing for this call is in
// flight); the error a mutate, merge or transaction function returned; a
// transport or service failure of a read, where nothing was written; and
// errors.ErrUnsupported, for an ability the backend lacks (Transact on
// blobs), before anything is sent.
var (
	// ErrNotFound: the key does not exist (HTTP 404).
	ErrNotFound = driver.ErrNotFound
	// ErrStorageNotFound: the table or container the Store's backend
	// keeps its documents in does not exist (Azure's TableNotFound,
	// ContainerNotFound): the storage is not set up, which no retry
	// changes; nothing was written. It is not ErrNotFound, which says a
	// document is missing: an app answers it as its own failure (HTTP
	// 500), not as a missing resource.
	ErrStorageNotFound = driver.ErrStorageNotFound
	// ErrExists: a create found the key already present (HTTP 409).
	ErrExists = driver.ErrExists
	// ErrConflict: the document changed since the caller read it (HTTP
	// 412). The error is a *ConflictError[T] when it comes from a Store.
	ErrConflict = driver.ErrConflict
	// ErrETagRequired: a conditional write or delete was given no ETag.
	// Nothing was sent. Use ETagAny to overwrite deliberately.
	ErrETagRequired = driver.ErrETagRequired
	// ErrInvalidKey: the key cannot be stored by the backend. Nothing was sent.
	ErrInvalidKey = driver.ErrInvalidKey
	// ErrTooLarge: the document exceeds the backend's limits. Nothing was sent.
	ErrTooLarge = driver.ErrTooLarge
	// ErrInvalidInput: an argument is out of range (for example a lease
	// duration or a fencing token of 0) or a value cannot be stored (an
	// *InvalidValueError): nothing was sent. A stored document that does
	// not decode into T (read by a Store of another type), or that holds a
	// member twice, matches it too, and so does an Update whose mutate
	// wrote its own key (the nested write landed; nothing of the Update
	// was sent).
	ErrInvalidInput = driver.ErrInvalidInput
	// ErrFenced: the document was written under a newer fencing token than
	// the one this write carries (see WithFence). Nothing was written.
	ErrFenced = driver.ErrFenced
	// ErrLocked: another holder has the lease or lock (HTTP 409
	// LeaseAlreadyPresent, or 412 LeaseIdMissing on a write).
	ErrLocked = driver.ErrLocked
	// ErrLockLost: a lease or lock this caller held is gone (expired,
	// broken or taken over); work done under it must stop.
	ErrLockLost = driver.ErrLockLost
	// ErrOutcomeUnknown: a write's response was lost and no read can tell
	// whether it was applied (see the package documentation's
	// "Exactly once"). The error is an *OutcomeUnknownError naming the
	// operation, the key and the failure that lost the response.
	ErrOutcomeUnknown = driver.ErrOutcomeUnknown
	// ErrUnavailable: the storage service refused the request without
	// applying it (Azure's 503 ServerBusy: throttling), on every attempt
	// the caller's time allowed. Nothing was written. Try again later.
	ErrUnavailable = driver.ErrUnavailable
)

// OutcomeUnknownError reports a write or delete whose response was lost
// when no read can tell whether it was applied: it may have landed, and
// been overwritten or deleted since, or not. It matches ErrOutcomeUnknown
// and no other sentinel; Cause (not unwrapped) is what lost the response.
// Get the document to see where it stands.
type OutcomeUnknownError = driver.OutcomeUnknownError

// InvalidValueError reports a value in a document that a codec cannot
// store so that it comes back exactly. It matches ErrInvalidInput. Nothing
// was sent.
type InvalidValueError struct {
	// Field is the path of the value in the document, by the names the
	// codec stores fields under (JSON names): Title, Tags[2],
	// Attrs["k"], Items[0].At; empty for the document itself.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *InvalidValueError) Error() string {
	if e.Field == "" {
		return ErrInvalidInput.Error() + ": " + e.Reason
	}
	return ErrInvalidInput.Error() + ": field " + e.Field + ": " + e.Reason
}

// Unwrap makes the error match ErrInvalidInput.
func (e *InvalidValueError) Unwrap() error { return ErrInvalidInput }

// errPanicked is what an operation whose user code (mutate, merge, fn,
// a codec, a yield) panicked records; the panic goes on up its caller's
// stack.
var errPanicked = groupcommit.ErrPanicked

// errorf is driver.Errorf: an error that matches sentinel and says more.
func errorf(sentinel error, format string, args ...any) error {
	return driver.Errorf(sentinel, format, args...)
}

// prefixed is err printed as `etagstore: op "key": …` (codec.Prefixed).
func prefixed(op, key string, err error) error { return codec.Prefixed(op, key, err) }
