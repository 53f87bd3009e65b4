package index

import (
	"context"

	"github.com/etagstore/etagstore/driver"
)

// This file overlaps a Reindex pass's steps, so that the service is
// kept at work while the client prepares the next request: a page's
// batches go batchesInFlight at a time; the next page is listed, and the
// last page listed again and rechecked, while they go. At most three
// pages are held at once: the one listed ahead, the one written, the one
// rechecked.
//
// Why the order stays safe: a page is listed again only once its own
// batches have ended (whenever it was first read), so that a document a
// writer changed before its entry was made is seen changed. Its recheck
// may meet the next page's batches on one entry (a value a writer moved
// from a document of one page to one of the next): each writes on the
// entry's version, and the batch that loses reads the entry again
// (commitWants), the recheck's delete gives way (repair).

// batchesInFlight is how many of a page's batches a Reindex sends at
// once: two, so that one is sent while the service works on the other
// (on Azurite, which works on one request at a time, more gain nothing).
const batchesInFlight = 2

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

// recheckBehind rechecks docs, the page of the keys after from and up to
// through, in a goroutine of its own, and hands its error over on the
// channel it returns (buffered, as listAhead's).
func (s *Set) recheckBehind(ctx context.Context, d Def, docs []driver.Item, from, through string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.recheck(ctx, d, docs, from, through) }()
	return ch
}

// rechecked is the recheck of no page: done.
func rechecked() <-chan error {
	ch := make(chan error, 1)
	ch <- nil
	return ch
}

// commitBatches commits batches (commitWants), batchesInFlight at a time
// (pool), and returns once all have ended: nil, or the first error, after
// which no more are sent.
func (s *Set) commitBatches(ctx context.Context, d Def, batches [][]want, out *Rebuilt) error {
	p := newPool(batchesInFlight)
	for _, b := range batches {
		p.do(func() error { return s.commitWants(ctx, d, b, out) })
	}
	return p.wait()
}
