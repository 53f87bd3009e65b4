package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// This file sweeps an expiry index: it deletes the documents whose entry
// says they expired by a cutoff. It reads the due entries alone, in
// time order within each scope (driver.Entries.Range: one range of
// names), then the documents they name, a scope's together (ReadMany),
// and deletes each expired document, with If-Match on the version read,
// together with every entry it holds (expiry, unique, lookup) and with
// the listed expiry entry conditioned on its own ETag, in one commit. A
// document written since (a refresh) fails that commit, or no longer
// holds the entry's instant, and stays. Over a backend that keeps no
// entries (Entryless) the sweeper lists every document instead.

// Swept is what a sweep pass did.
type Swept struct {
	Swept     int           // documents deleted
	Refreshed int           // documents found written since their entry was listed: left alone
	Cleaned   int           // entries removed whose document was gone or no longer held them
	Lag       time.Duration // the longest time past its expiry a document swept had waited
	Listed    int           // entries (documents, when Entryless) the pass read
}

// sendAttempts bounds how often a sweep sends one commit whose answer
// was lost or refused as unavailable; maxSends, how often it sends one
// at all (an entry refused is learnt, and the commit sent again).
const (
	sendAttempts = 4
	maxSends     = 16
)

// Sweep deletes the documents that d, an expiry index, says expired at
// or before cutoff, as the file's comment says; now is the clock's
// instant, for Lag. An error stops the pass, leaving what it did in out.
func (s *Set) Sweep(ctx context.Context, d Def, cutoff, now time.Time, out *Swept) error {
	if s.Entryless() {
		return s.sweepDocs(ctx, d, cutoff, now, out)
	}
	if err := s.Usable(); err != nil {
		return err
	}
	if s.space.Range == nil {
		return fmt.Errorf("%w: the backend lists no range of entries (driver.Entries.Range), which Sweep reads", errors.ErrUnsupported)
	}
	prefix := indexPrefix(d)
	below := prefix + Stamp(cutoff.Add(time.Millisecond).Truncate(time.Millisecond))
	var chunk []driver.Item
	var scope string
	for it, err := range s.space.Range(ctx, prefix, below) {
		if err != nil {
			return err
		}
		out.Listed++
		sc, err := s.space.Scope(it.Key)
		if err != nil {
			continue // not an entry of this Set's scopes
		}
		if len(chunk) == batchSize || len(chunk) > 0 && sc != scope {
			if err := s.sweepChunk(ctx, d, chunk, now, out); err != nil {
				return err
			}
			chunk = chunk[:0]
		}
		scope = sc
		chunk = append(chunk, it)
	}
	return s.sweepChunk(ctx, d, chunk, now, out)
}

// sweepChunk sweeps the documents of entries, due expiry entries of one
// scope.
func (s *Set) sweepChunk(ctx context.Context, d Def, entries []driver.Item, now time.Time, out *Swept) error {
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
			if s.dropEntry(ctx, it) {
				out.Cleaned++
			}
			continue
		}
		vals, err := s.Values(doc.Key, doc.Data)
		if err != nil {
			continue // a document T cannot read keeps its entries
		}
		if !slices.Contains(vals[pos], e.Value) { // written since with another expiry
			out.Refreshed++
			if s.dropEntry(ctx, it) {
				out.Cleaned++
			}
			continue
		}
		swept, err := s.sweepDoc(ctx, doc, it)
		switch {
		case err != nil:
			return err
		case swept == deleted:
			out.Swept++
			if at, ok := Unstamp(e.Value); ok {
				out.Lag = max(out.Lag, now.Sub(at))
			}
		case swept == written:
			out.Refreshed++
		}
	}
	return nil
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
	var m any = memo{entry.Key: entry.ETag}
	lost := false
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
		case errors.As(err, &ae) && ae.Index > 0 && !lost:
			// An entry it holds was not as assumed (one the document's
			// writer left missing): learn it and send again.
			if m, err = s.Refused(ctx, req, implied, ae.Index-1, ae.Err, m); err != nil {
				return written, err
			}
		case errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound):
			_, rerr := s.Backend.Read(ctx, doc.Key)
			switch {
			case errors.Is(rerr, driver.ErrNotFound) && lost:
				return deleted, nil // an earlier send whose answer was lost deleted it
			case errors.Is(rerr, driver.ErrNotFound):
				return gone, nil
			}
			return written, nil
		case attempt+1 < sendAttempts && ctx.Err() == nil && (errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrAmbiguous) || errors.Is(err, driver.ErrOutcomeUnknown)):
			lost = lost || !errors.Is(err, driver.ErrNotApplied)
		default:
			return written, err
		}
	}
}

// dropEntry deletes entry, as listed, conditioned on its ETag: true when
// this call deleted it.
func (s *Set) dropEntry(ctx context.Context, entry driver.Item) bool {
	_, err := s.commit(ctx, []driver.Action{{Key: entry.Key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(entry.ETag)}}})
	return err == nil
}

// sweepDocs is Sweep over a backend that keeps no entries: it lists
// every document (a listing page per 5,000 blobs, and the blobs' reads
// as the backend lists them) and deletes each one expired by cutoff with
// If-Match on the version listed.
func (s *Set) sweepDocs(ctx context.Context, d Def, cutoff, now time.Time, out *Swept) error {
	due := Stamp(cutoff.Truncate(time.Millisecond))
	for it, err := range s.Backend.List(ctx, "") {
		if err != nil {
			return err
		}
		out.Listed++
		vals, err := s.Values(it.Key, it.Data)
		if err != nil || len(vals[0]) == 0 || strings.Compare(vals[0][0], due) > 0 {
			continue
		}
		err = s.Backend.Delete(ctx, it.Key, it.ETag)
		switch {
		case err == nil:
			out.Swept++
			if at, ok := Unstamp(vals[0][0]); ok {
				out.Lag = max(out.Lag, now.Sub(at))
			}
		case errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound):
			out.Refreshed++
		default:
			return err
		}
	}
	return nil
}
