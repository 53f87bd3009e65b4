package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/request"
)

// This file sweeps an expiry index: it deletes the documents whose entry
// says they expired by a cutoff. It reads the due entries alone, in
// time order within each scope (driver.Entries.Range: one range of
// names), then the documents they name, a scope's together (ReadMany),
// and deletes each expired document, with If-Match on the version read,
// together with every entry it holds (expiry, unique, lookup) and with
// the listed expiry entry conditioned on its own ETag, in one commit. A
// document written since (a refresh) fails that commit, or no longer
// holds the entry's instant, and stays. The deletes of a pass go
// DocsAtOnce at a time, while the next scope's documents are read. Over
// a backend that keeps no entries (Entryless) the sweeper lists every
// document instead (with Abilities.Versions, their versions and the
// instants their writes kept, reading only those due).

// Swept is what a sweep pass did.
type Swept struct {
	Swept     int           // documents deleted
	Refreshed int           // documents found written since their entry was listed: left alone
	Cleaned   int           // entries removed whose document was gone or no longer held them
	Lag       time.Duration // the longest time past its expiry a document swept had waited
	Listed    int           // entries (documents, when Entryless) the pass read
}

// sendAttempts bounds how often a sweep sends one commit whose answer was
// lost or that the service refused unapplied (throttled); maxSends, how
// often it sends one at all (an entry refused is learnt, and the commit
// sent again).
const (
	sendAttempts = 4
	maxSends     = 16
)

// Due is what a sweep deletes: the documents that expired at or before
// Cutoff (At gives a document's instant exactly: its stamp is rounded up
// to the millisecond); Now is the clock's instant, for Lag.
type Due struct {
	Cutoff, Now time.Time
	At          func(key string, data []byte) (time.Time, error)
}

// due reports whether doc, whose stamp is due, has expired by the cutoff
// (false when At fails on it: a document T cannot read is left alone).
func (d Due) due(doc driver.Item) (time.Time, bool) {
	at, err := d.At(doc.Key, doc.Data)
	return at, err == nil && !at.IsZero() && !at.After(d.Cutoff)
}

// Sweep deletes the documents that d, an expiry index, says are due, as
// the file's comment says. An error stops the pass, leaving what it did
// in out.
func (s *Set) Sweep(ctx context.Context, d Def, due Due, out *Swept) error {
	if s.Entryless() {
		return s.sweepDocs(ctx, due, out)
	}
	if err := s.Usable(); err != nil {
		return err
	}
	if s.space.Range == nil {
		return fmt.Errorf("%w: the backend lists no range of entries (driver.Entries.Range), which Sweep reads", errors.ErrUnsupported)
	}
	prefix := indexPrefix(d)
	last, _ := Unstamp(Stamp(due.Cutoff)) // the last millisecond a due stamp may name
	below := prefix + Stamp(last.Add(time.Millisecond))
	p := newSweepPool(out)
	for run, err := range ByScope(s.space.Range(ctx, prefix, below), s.space, batchSize) {
		if err != nil {
			p.fail(err)
			break
		}
		p.listed(len(run.Items))
		if err := s.sweepChunk(ctx, d, run.Items, due, p); err != nil {
			p.fail(err)
		}
		if p.failed() {
			break
		}
	}
	return p.wait()
}

// sweepChunk sweeps the documents of entries, due expiry entries of one
// scope: it reads them together, then hands each one's work to p.
func (s *Set) sweepChunk(ctx context.Context, d Def, entries []driver.Item, due Due, p *sweepPool) error {
	es := make([]Entry, len(entries))
	keys := make([]string, 0, len(entries))
	for i, it := range entries {
		if e, err := decode(it); err == nil && e.Index == d.Name {
			es[i] = e
			keys = append(keys, e.Doc)
		}
	}
	docs, err := s.readItems(ctx, keys)
	if err != nil {
		return err
	}
	pos := slices.IndexFunc(s.Defs, func(x Def) bool { return x.Name == d.Name })
	for i, it := range entries {
		e := es[i]
		if e.Doc == "" {
			continue // not this index's, or unreadable: Repair's to judge
		}
		doc, ok := docs[e.Doc]
		if !ok { // gone: its entry stayed behind (a writer that did not declare the index)
			p.do(func(out *Swept) error {
				if s.dropEntry(ctx, it) {
					out.Cleaned++
				}
				return nil
			})
			continue
		}
		vals, err := s.Values(doc.Key, doc.Data)
		if err != nil {
			continue // a document T cannot read keeps its entries
		}
		if !slices.Contains(vals[pos], e.Value) { // written since with another expiry
			p.do(func(out *Swept) error {
				out.Refreshed++
				if s.dropEntry(ctx, it) {
					out.Cleaned++
				}
				return nil
			})
			continue
		}
		at, ok := due.due(doc)
		if !ok {
			continue // due within the cutoff's millisecond, after the cutoff: the next pass
		}
		p.do(func(out *Swept) error {
			swept, err := s.sweepDoc(ctx, doc, it)
			switch {
			case err != nil:
				return err
			case swept == deleted:
				out.Swept++
				out.Lag = max(out.Lag, due.Now.Sub(at))
			case swept == written:
				out.Refreshed++
			}
			return nil
		})
		if p.failed() {
			break
		}
	}
	return nil
}

// DocsAtOnce is how many documents (or entries) a sweep pass deletes at
// once: each in a request of its own.
const DocsAtOnce = 8

// sweepPool runs a pass's deletes, DocsAtOnce at a time (pool), and
// gathers what they did.
type sweepPool struct {
	*pool
	mu  sync.Mutex // over out
	out *Swept
}

func newSweepPool(out *Swept) *sweepPool {
	return &sweepPool{pool: newPool(DocsAtOnce), out: out}
}

// do runs work as pool.do does; work's changes to out are made under the
// lock.
func (p *sweepPool) do(work func(out *Swept) error) {
	p.pool.do(func() error {
		var mine Swept
		err := work(&mine)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.out.Swept += mine.Swept
		p.out.Refreshed += mine.Refreshed
		p.out.Cleaned += mine.Cleaned
		p.out.Lag = max(p.out.Lag, mine.Lag)
		return err
	})
}

func (p *sweepPool) listed(n int) {
	p.mu.Lock()
	p.out.Listed += n
	p.mu.Unlock()
}

// fate is what became of a document a sweep meant to delete.
type fate int

const (
	deleted fate = iota // by this sweep
	written             // since it was read: left alone (refreshed)
	gone                // by another sweeper or writer first
)

// sweepDoc deletes doc, as read, with every entry it holds, conditioned
// on doc's ETag and on entry's (the listed expiry entry). When a write
// since has changed either, nothing is deleted: the document was written
// since, or is gone, as a read then finds.
func (s *Set) sweepDoc(ctx context.Context, doc, entry driver.Item) (fate, error) {
	del := driver.Action{Key: doc.Key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(doc.ETag)}}
	req := engine.Request{{Action: del, Was: doc, WasKnown: true}}
	var m any = memo{entry.Key: {etag: entry.ETag, doc: doc.Key}}
	var lost error // the last send's answer, lost
	for attempt := 0; ; attempt++ {
		if attempt == maxSends {
			return written, nil // its entries keep changing: the next pass tries again
		}
		implied, known, err := s.Imply(ctx, req, m)
		if m = known; err != nil {
			return written, err
		}
		_, err = s.commit(ctx, append([]driver.Action{del}, implied...))
		var ae *driver.ActionError
		switch {
		case err == nil:
			return deleted, nil
		case ambiguous(err) && attempt+1 < sendAttempts && ctx.Err() == nil:
			lost = err // sent again: a send that lands tells it had not
		case ambiguous(err):
			return written, err
		case lost != nil && (errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound)):
			// Refused after a lost answer: whether that send deleted it,
			// or another sweeper did meanwhile, no read can tell. The pass
			// ends here, without counting it, and the next one sees.
			return written, lost
		case errors.As(err, &ae) && ae.Index > 0:
			// An entry it holds was not as assumed (one the document's
			// writer left missing): learn it and send again.
			if m, err = s.Refused(ctx, req, implied, ae.Index-1, ae.Err, m); err != nil {
				return written, err
			}
		case errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound):
			return s.fateOf(ctx, doc.Key)
		case errors.Is(err, driver.ErrNotApplied) && attempt+1 < sendAttempts && ctx.Err() == nil:
			// refused unapplied (throttled): sent again
		default:
			return written, err
		}
	}
}

// fateOf is what became of key, a document whose delete was refused:
// written since, or gone (another sweeper or writer deleted it first).
func (s *Set) fateOf(ctx context.Context, key string) (fate, error) {
	_, err := s.Backend.Read(ctx, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return gone, nil
	case err != nil:
		return written, err
	}
	return written, nil
}

// dropEntry deletes entry, as listed, conditioned on its ETag: true when
// this call deleted it.
func (s *Set) dropEntry(ctx context.Context, entry driver.Item) bool {
	_, err := s.commit(ctx, []driver.Action{{Key: entry.Key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(entry.ETag)}}})
	return err == nil
}

// sweepDocs is Sweep over a backend that keeps no entries. With
// Abilities.Versions (blobstore) it lists the documents' versions alone
// (a page per 5,000 blobs) and reads only those whose Expires is due, or
// unknown (written by a Store without the index); otherwise it lists
// every document (the blobs' reads as the backend lists them). It
// judges each one read by its data, and deletes those due with If-Match
// on the version read, DocsAtOnce at a time.
func (s *Set) sweepDocs(ctx context.Context, due Due, out *Swept) error {
	p := newSweepPool(out)
	versions := s.Backend.Abilities().Versions
	list := s.Backend.List
	if versions != nil {
		list = versions
	}
	last, _ := Unstamp(Stamp(due.Cutoff)) // the last millisecond a due stamp may name
	for it, err := range list(ctx, "") {
		if err != nil {
			p.fail(err)
			break
		}
		p.listed(1)
		switch {
		case versions != nil && !it.Expires.IsZero() && it.Expires.After(last):
			// not due (a stamp is rounded up to the millisecond)
		case versions != nil: // due, or written without a stamp: read it
			p.do(func(out *Swept) error { return s.sweepRead(ctx, it.Key, due, out) })
		default:
			if at, ok := due.due(it); ok {
				p.do(func(out *Swept) error { return s.sweepListed(ctx, it, at, due, out) })
			}
		}
		if p.failed() {
			break
		}
	}
	return p.wait()
}

// sweepRead reads key, listed as due, and sweeps it if its data says it
// is (a document gone since is nothing to sweep).
func (s *Set) sweepRead(ctx context.Context, key string, due Due, out *Swept) error {
	doc, err := s.Backend.Read(ctx, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	if at, ok := due.due(doc); ok {
		return s.sweepListed(ctx, doc, at, due, out)
	}
	return nil
}

// sweepListed deletes doc, read and due at at, with If-Match on its
// version, and counts what became of it.
func (s *Set) sweepListed(ctx context.Context, doc driver.Item, at time.Time, due Due, out *Swept) error {
	switch f, err := s.deleteDoc(ctx, doc); {
	case err != nil:
		return err
	case f == deleted:
		out.Swept++
		out.Lag = max(out.Lag, due.Now.Sub(at))
	case f == written:
		out.Refreshed++
	}
	return nil
}

// deleteDoc deletes doc, as listed, with If-Match on its version (a
// backend that keeps no entries), as sweepDoc does.
func (s *Set) deleteDoc(ctx context.Context, doc driver.Item) (fate, error) {
	var lost error
	for attempt := 0; ; attempt++ {
		err := s.Backend.Delete(ctx, doc.Key, doc.ETag)
		switch {
		case err == nil:
			return deleted, nil
		case ambiguous(err) && attempt+1 < sendAttempts && ctx.Err() == nil:
			lost = err
		case ambiguous(err):
			return written, err
		case lost != nil && (errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound)):
			return written, lost // as in sweepDoc: the pass ends here
		case errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound):
			return s.fateOf(ctx, doc.Key)
		case !errors.Is(err, driver.ErrNotApplied) || attempt+1 == sendAttempts || ctx.Err() != nil:
			return written, err
		}
	}
}

// ambiguous reports whether a request that failed with err may have been
// applied (request.Ambiguous): its answer lost.
func ambiguous(err error) bool { return request.Ambiguous(err) }
