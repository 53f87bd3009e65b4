package etagstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// entrylessCommitter is a memstore that keeps no index entries but
// commits atomically, and records the Expires each write carried, by
// key, whether it came by Write or by Commit.
type entrylessCommitter struct {
	driver.Backend
	mu      sync.Mutex
	expires map[string]time.Time
}

func (b *entrylessCommitter) note(key string, w driver.Write) {
	b.mu.Lock()
	b.expires[key] = w.Expires
	b.mu.Unlock()
}

func (b *entrylessCommitter) Write(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	b.note(key, w)
	return b.Backend.Write(ctx, key, w)
}

func (b *entrylessCommitter) Abilities() driver.Abilities {
	a := b.Backend.Abilities()
	a.Entries = nil
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		for _, x := range actions {
			if !x.Delete && !x.Check {
				b.note(x.Key, x.Write)
			}
		}
		return commit(ctx, actions)
	}
	return a
}

// Over a backend that keeps no entries but commits, every write of a
// Store with an Expiry carries driver.Write.Expires: a Create (Write)
// and a Transact of two documents (Commit) alike.
func TestStampingReachesCommit(t *testing.T) {
	ctx := t.Context()
	clock := newFakeClock()
	b := &entrylessCommitter{Backend: memstore.New(nil), expires: map[string]time.Time{}}
	s := etagstore.New[account](b, &etagstore.Options{Clock: clock}, etagstore.Expiry(func(a account) time.Time { return a.Until }))
	until := clock.Now().Add(time.Hour)
	if _, err := s.Create(ctx, "w", account{Until: until}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[account]) error {
		if err := tx.Put("c1", account{Until: until}); err != nil {
			return err
		}
		return tx.Put("c2", account{Until: until})
	})
	if err != nil {
		t.Fatalf("Transact over an entryless committer: %v", err)
	}
	for _, k := range []string{"w", "c1", "c2"} {
		if got, ok := b.expires[k]; !ok || !got.Equal(until) {
			t.Errorf("the write of %q carried Expires %v (sent %v), want %v", k, got, ok, until)
		}
	}
}
