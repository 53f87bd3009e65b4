package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// entryReadGate is a backend whose first Read of an index entry that
// finds it missing waits, once answered, until release is closed.
type entryReadGate struct {
	driver.Backend
	once    sync.Once
	missing chan struct{} // closed when that read has its answer
	release chan struct{}
}

func (g *entryReadGate) Read(ctx context.Context, key string) (driver.Item, error) {
	it, err := g.Backend.Read(ctx, key)
	if strings.HasPrefix(key, "\uFFFF") && errors.Is(err, driver.ErrNotFound) {
		g.once.Do(func() { close(g.missing); <-g.release })
	}
	return it, err
}

// TestReindexWriterLearntEntryMissing: a declaring writer renames a card
// whose old title has no entry yet: its first commit, deleting the
// entry, is refused (missing), and it reads the entry: missing. Before it
// sends again, Reindex runs whole: it makes the old title's entry from
// the card (unchanged), and its recheck finds the card unchanged. The
// writer then commits the rename without the delete it learnt needless,
// and, once landed, reads that entry again and deletes it: the old
// title's entry does not stay.
func TestReindexWriterLearntEntryMissing(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	seedCards(t, mem, 10)
	g := &entryReadGate{Backend: mem, missing: make(chan struct{}), release: make(chan struct{})}
	writer := etagstore.New(g, nil, byTitle)
	renamed := make(chan error, 1)
	go func() {
		_, err := writer.Update(ctx, "k0005", func(c *card) error { c.Title = "renamed"; return nil })
		renamed <- err
	}()
	waitFor(t, g.missing, "the writer's read of the old title's entry")
	if err := etagstore.New(mem, nil, byTitle).Reindex(ctx, byTitle); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	close(g.release)
	if err := waitFor(t, renamed, "the rename"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"renamed": "k0005"}
	for i := range 10 {
		if i != 5 {
			want[fmt.Sprint("t", i)] = fmt.Sprintf("k%04d", i)
		}
	}
	wantTitleEntries(t, mem, want)
}
