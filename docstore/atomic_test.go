package docstore

import (
	"testing"

	"gocloud.dev/docstore"
	"gocloud.dev/docstore/drivertest"
	"gocloud.dev/gcerrors"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Atomic writes are what the backend can commit at once, and are refused
// whole otherwise, with nothing written: on tables documents of two
// partitions (InvalidArgument), on blobs any (Unimplemented).
func TestAtomicWritesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		coll func(t *testing.T) *docstore.Collection
		want gcerrors.ErrorCode
	}{
		{"table across partitions", func(t *testing.T) *docstore.Collection {
			c, err := OpenCollectionWithKeyFunc(tablestore.New(azuritetest.NewTable(t), nil), drivertest.HighScoreKey, &Options{PartitionField: "Game"})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, gcerrors.InvalidArgument},
		{"blob", func(t *testing.T) *docstore.Collection {
			c, err := OpenCollectionWithKeyFunc(blobstore.New(azuritetest.NewContainer(t), nil), drivertest.HighScoreKey, nil)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, gcerrors.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			coll := tc.coll(t)
			t.Cleanup(func() { _ = coll.Close() })
			err := coll.Actions().AtomicWrites().
				Create(&drivertest.HighScore{Game: "g1", Player: "p", Score: 1}).
				Create(&drivertest.HighScore{Game: "g2", Player: "p", Score: 2}).
				Do(ctx)
			if c := gcerrors.Code(err); c != tc.want {
				t.Fatalf("atomic writes: %v, want %v", err, tc.want)
			}
			for _, g := range []string{"g1", "g2"} {
				if c := gcerrors.Code(coll.Get(ctx, &drivertest.HighScore{Game: g, Player: "p"})); c != gcerrors.NotFound {
					t.Errorf("%s after a refused atomic write: %v, want NotFound", g, c)
				}
			}
		})
	}
}
