package index

import (
	"context"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// This file is how a Store that expires documents over a backend that
// keeps no entries (Entryless: blobs) tells the backend when each
// document expires: every write carries driver.Write.Expires, which the
// backend keeps beside the document (blobstore: the blob's metadata) and
// lists with it (driver.Abilities.Versions), so that a sweep reads only
// the documents due.

// Stamping is b whose writes carry when the document they write expires,
// by at: 9999-12-31 for a document that never expires (at's error sends
// none: the write itself is refused or judged as it would be without). Read,
// List and the rest are b's.
func Stamping(b driver.Backend, at func(key string, data []byte) (time.Time, error)) driver.Backend {
	return stamping{Backend: Unstamped(b), at: at} // b of another Store's: its stamps are not this one's
}

// Unstamped is b without Stamping's wrapper: the backend a Store was
// given.
func Unstamped(b driver.Backend) driver.Backend {
	if s, ok := b.(stamping); ok {
		return s.Backend
	}
	return b
}

// never is the instant a document that never expires is stamped with, so
// that a sweep lists it as not due instead of reading it.
var never = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

type stamping struct {
	driver.Backend
	at func(key string, data []byte) (time.Time, error)
}

func (s stamping) stamp(key string, w driver.Write) driver.Write {
	if w.Mode == driver.ModeReplace && w.Data != nil {
		if at, err := s.at(key, w.Data); err == nil {
			if at.IsZero() {
				at = never
			}
			w.Expires = at
		}
	}
	return w
}

func (s stamping) Write(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	return s.Backend.Write(ctx, key, s.stamp(key, w))
}

// Abilities are b's, with a Commit that stamps each write it carries.
func (s stamping) Abilities() driver.Abilities {
	a := s.Backend.Abilities()
	if commit := a.Commit; commit != nil {
		a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
			stamped := make([]driver.Action, len(actions))
			for i, x := range actions {
				if !x.Delete && !x.Check {
					x.Write = s.stamp(x.Key, x.Write)
				}
				stamped[i] = x
			}
			return commit(ctx, stamped)
		}
	}
	return a
}

// Unwrap is b.
func (s stamping) Unwrap() driver.Backend { return s.Backend }
