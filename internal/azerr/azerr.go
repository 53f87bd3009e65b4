// Package azerr holds what the backends' error mappings share: the
// sentinel for an HTTP status when the service's error code is not one a
// backend names itself. Each backend still maps its own codes in one place.
package azerr

import (
	"fmt"
	"net/http"

	"github.com/etagstore/etagstore/driver"
)

// PreconditionFailed is the sentinel of a 412: ErrExists for a create
// (If-None-Match: * failed), ErrConflict otherwise.
func PreconditionFailed(create bool) error {
	if create {
		return driver.ErrExists
	}
	return driver.ErrConflict
}

// ServerBusy marks err as refused unapplied when the service answered 503
// with the error code ServerBusy (Azure Storage's throttling answer, given
// before the request is processed): the Store then sends it again after a
// pause. Any other error is returned as it is.
func ServerBusy(status int, code string, err error) error {
	if status == http.StatusServiceUnavailable && code == "ServerBusy" {
		return fmt.Errorf("%w: %w", driver.ErrNotApplied, err)
	}
	return err
}

// ByStatus returns the sentinel for an HTTP status, or nil when the status
// has none (the error then stays unclassified).
func ByStatus(status int, create bool) error {
	switch status {
	case http.StatusBadRequest:
		// The service refused the request as malformed (a table name too
		// short, say): definite, never applied.
		return driver.ErrInvalidInput
	case http.StatusPreconditionFailed:
		return PreconditionFailed(create)
	case http.StatusConflict:
		return driver.ErrExists
	case http.StatusNotFound:
		return driver.ErrNotFound
	case http.StatusRequestEntityTooLarge:
		return driver.ErrTooLarge
	}
	return nil
}
