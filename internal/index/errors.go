package index

import (
	"fmt"

	"github.com/etagstore/etagstore/driver"
)

// UniqueError reports a write refused because a unique index's value is
// held by another document; nothing was written. It matches
// driver.ErrExists.
type UniqueError struct {
	Index string // the index's name
	Value string // the value, as the index function gave it
	Key   string // the document holding it
	By    string // the document whose write was refused
}

func (e *UniqueError) Error() string {
	return fmt.Sprintf("%v: index %q: %q holds the value %q, so %q cannot take it", driver.ErrExists, e.Index, e.Key, e.Value, e.By)
}

func (e *UniqueError) Unwrap() error { return driver.ErrExists }
