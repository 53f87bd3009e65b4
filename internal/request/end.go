package request

import (
	"errors"
	"strings"

	"github.com/etagstore/etagstore/driver"
)

// End is the error a delivery of the write op, named by key, ends with
// once its attempts are over and the last returned err (nil: the write
// ended well). A request whose answer was lost and never settled
// (unsettled: what lost it) ends as an *driver.OutcomeUnknownError, its
// cause both errors on one line (JoinLine). A write that lost its last
// race (raced) and ran out of time on a create beaten to it, or a
// document deleted under it, lost its races: ErrConflict, whatever the
// last refusal was. Anything else is err.
func End(op, key string, err, unsettled error, raced bool) error {
	switch {
	case err == nil:
		return nil
	case unsettled != nil && !errors.Is(err, driver.ErrOutcomeUnknown):
		return &driver.OutcomeUnknownError{Op: op, Key: key, Cause: JoinLine(unsettled, err)}
	case raced && !errors.Is(err, driver.ErrConflict) && (errors.Is(err, driver.ErrExists) || errors.Is(err, driver.ErrNotFound)):
		last := strings.TrimPrefix(driver.SentinelOf(err).Error(), "etagstore: ")
		return driver.Errorf(driver.ErrConflict, "%s %q lost every race, the last refused as %s", op, key, last)
	}
	return err
}
