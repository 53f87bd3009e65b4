package memstore_test

import (
	"errors"
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// Commit applies every action or none: one failed condition leaves every
// key as it was and names the action.
func TestCommitIsAtomic(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	a1, err := b.Write(ctx, "a", driver.Write{Data: []byte(`1`), Cond: driver.Cond{Kind: driver.CondCreate}})
	if err != nil {
		t.Fatal(err)
	}
	commit := b.Abilities().Commit
	_, err = commit(ctx, []driver.Action{
		{Key: "a", Write: driver.Write{Data: []byte(`2`), Cond: driver.IfMatch(a1)}},
		{Key: "b", Write: driver.Write{Data: []byte(`2`), Cond: driver.IfMatch(`"stale"`)}},
	})
	var ae *driver.ActionError
	if !errors.As(err, &ae) || ae.Index != 1 || !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("commit with a missing key = %v, want an ActionError naming action 1, ErrNotFound", err)
	}
	if it, _ := b.Read(ctx, "a"); it.ETag != a1 || string(it.Data) != `1` {
		t.Errorf("a after a failed commit = %s %s, want it unchanged", it.ETag, it.Data)
	}
	etags, err := commit(ctx, []driver.Action{
		{Key: "a", Delete: true, Write: driver.Write{Cond: driver.IfMatch(a1)}},
		{Key: "b", Write: driver.Write{Data: []byte(`3`), Cond: driver.Cond{Kind: driver.CondCreate}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(ctx, "a"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("a after its delete: %v", err)
	}
	if it, err := b.Read(ctx, "b"); err != nil || it.ETag != etags[1] || etags[0] != "" {
		t.Errorf("b = %+v, %v; etags %q", it, err, etags)
	}
	_, err = commit(ctx, []driver.Action{
		{Key: "c", Write: driver.Write{Data: []byte(`1`), Cond: driver.Cond{Kind: driver.CondCreate}}},
		{Key: "c", Write: driver.Write{Data: []byte(`2`)}},
	})
	if !errors.As(err, &ae) || ae.Index != 1 || !errors.Is(err, driver.ErrInvalidInput) {
		t.Errorf("one key twice = %v, want ErrInvalidInput naming action 1", err)
	}
	if _, err := b.Write(ctx, "a", driver.Write{Data: []byte(`{}`), Mode: driver.ModeMerge}); !errors.Is(err, driver.ErrInvalidInput) {
		t.Errorf("a merge on memstore = %v, want ErrInvalidInput", err)
	}
}
