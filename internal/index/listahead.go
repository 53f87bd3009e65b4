package index

import (
	"context"

	"github.com/etagstore/etagstore/driver"
)

// This file lists a Reindex's next page of documents while the current
// page's entries are committed and the page is listed again, so that
// the listing's round trip and the service's work on it overlap the
// batches' instead of following them. The page listed ahead is read
// before the current page's batches have ended, which is as safe as
// reading it after: each page is listed again once its own batches have
// ended (recheck), whenever it was first read. Two pages are held at
// once, at most.

// listing is one page of documents, as ListPage answered.
type listing struct {
	items []driver.Item
	more  bool
	err   error
}

// listAhead lists the page of documents after the key after in a
// goroutine of its own, and hands it over on the channel it returns
// (buffered: the goroutine never waits for a reader, and ends when ctx
// does, with the listing).
func (s *Set) listAhead(ctx context.Context, after string) <-chan listing {
	ch := make(chan listing, 1)
	go func() {
		items, more, err := s.Backend.ListPage(ctx, "", after, ReindexPage)
		ch <- listing{items, more, err}
	}()
	return ch
}
