package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// lostFirstCommit is a backend whose first Commit's answer is lost before
// the commit is applied: the Store learns nothing, and must settle it.
type lostFirstCommit struct {
	driver.Backend
	commits atomic.Int32
}

func (b *lostFirstCommit) Abilities() driver.Abilities {
	a := b.Backend.Abilities()
	inner := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		if b.commits.Add(1) == 1 {
			return nil, fmt.Errorf("%w: the connection was reset", driver.ErrAmbiguous)
		}
		return inner(ctx, actions)
	}
	return a
}

// TestIndexRefusalAfterLostAnswerEnds: a write whose first answer was
// lost (not applied), and whose next try is refused for an index entry
// (the title is held), ends at once: the refusal is a fact of the entry,
// not a request to send again as it is (which the engine once did, until
// the policy's time ran out).
func TestIndexRefusalAfterLostAnswerEnds(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	plain := etagstore.New(mem, nil, byTitle)
	if _, err := plain.Create(ctx, "holder", card{Title: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Create(ctx, "c", card{Title: "c"}); err != nil {
		t.Fatal(err)
	}
	b := &lostFirstCommit{Backend: mem}
	cards := etagstore.New(b, &etagstore.Options{DisableGroupCommit: true}, byTitle)
	_, err := cards.Update(ctx, "c", func(v *card) error { v.Title = "X"; return nil })
	if !errors.Is(err, etagstore.ErrOutcomeUnknown) && !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("Update = %v, want the held title's refusal (or an unknown outcome naming it)", err)
	}
	if n := b.commits.Load(); n > 3 {
		t.Fatalf("%d commits sent: the refusal was sent again as it was", n)
	}
	if d, err := cards.Get(ctx, "c"); err != nil || d.Value.Title != "c" {
		t.Fatalf("c = %+v, %v", d.Value, err)
	}
}
