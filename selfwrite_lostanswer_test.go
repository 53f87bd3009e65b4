package etagstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

// A nested write whose every answer is lost after it committed: the read
// that settles it shows it landed, so the outer Update fails at once as
// for any nested write, and the nested write landed once.
func TestSelfWriteNestedAnswerLost(t *testing.T) {
	for _, cfg := range selfWriteConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			fb := storetest.NewFaultyBackend(memstore.New(nil), storetest.Faults{Seed: 1, DropAfterCommit: 1})
			opts := cfg.opts
			s := etagstore.New[nestDoc](fb, &opts)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if _, err := s.Create(ctx, "k", nestDoc{}); err != nil {
				t.Fatal(err)
			}
			runs := 0
			_, err := s.Update(ctx, "k", func(d *nestDoc) error {
				runs++
				if _, err := s.Update(ctx, "k", func(d *nestDoc) error { d.N += 10; return nil }); err != nil {
					return err
				}
				d.N++
				return nil
			})
			wantSelfWrite(t, err, "Update")
			if got, err := s.Get(t.Context(), "k"); err != nil || got.Value.N != 10 || runs != 1 {
				t.Errorf("k = %+v, %v after %d runs; want N = 10 after one", got.Value, err, runs)
			}
		})
	}
}
