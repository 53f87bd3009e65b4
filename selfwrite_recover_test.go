package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// A write made from a deferred function that recovered the panic of a
// mutate runs on a stack that still holds the panicked mutate's frames:
// the chain that spelled the panicked run's slot. That slot was freed
// when the panic left Run, and may since be held by another goroutine's
// Update. The write from the recover handler is nobody's nested write: an
// Update of that key on another goroutine must not be failed for it.
func TestSelfWriteRecoverHandlerNotBlamed(t *testing.T) {
	for _, cfg := range []struct {
		name string
		opts etagstore.Options
	}{
		{"GroupCommit", etagstore.Options{}},
		{"DisableGroupCommit", etagstore.Options{DisableGroupCommit: true}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			opts := cfg.opts
			s := etagstore.New[nestDoc](memstore.New(nil), &opts)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			for _, k := range []string{"x", "k"} {
				if _, err := s.Create(ctx, k, nestDoc{}); err != nil {
					t.Fatal(err)
				}
			}

			// G1: an Update of "x" whose mutate panics; its recover
			// handler waits, then upserts "k" (a write of its own).
			inHandler, goOn, g1done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				defer func() {
					if r := recover(); r == nil {
						g1done <- errors.New("no panic")
						return
					}
					close(inHandler)
					<-goOn
					_, err := s.Upsert(ctx, "k", nestDoc{N: 100})
					g1done <- err
				}()
				_, _ = s.Update(ctx, "x", func(*nestDoc) error { panic("boom") })
			}()
			<-inHandler

			// Every other slot held by an Update blocked in its mutate: the
			// next run to start takes the slot the panicked run had.
			const others = 4095
			var wg sync.WaitGroup
			entered, release := make(chan struct{}, others), make(chan struct{})
			for i := range others {
				wg.Go(func() {
					_, err := s.Update(ctx, fmt.Sprintf("h%d", i), func(d *nestDoc) error {
						entered <- struct{}{}
						<-release
						d.N++
						return nil
					}, etagstore.CreateIfMissing())
					if err != nil {
						t.Errorf("holder %d: %v", i, err)
					}
				})
			}
			for range others {
				<-entered
			}

			// G2: an innocent Update of "k", its mutate waiting while G1's
			// handler upserts "k".
			g2entered, g2go := make(chan struct{}), make(chan struct{})
			var once sync.Once
			g2err := make(chan error, 1)
			go func() {
				_, err := s.Update(ctx, "k", func(d *nestDoc) error {
					once.Do(func() { close(g2entered); <-g2go })
					d.N++
					return nil
				})
				g2err <- err
			}()
			<-g2entered
			close(release)
			wg.Wait()
			close(goOn)
			if err := <-g1done; err != nil {
				t.Fatalf("the recover handler's Upsert: %v", err)
			}
			close(g2go)
			if err := <-g2err; err != nil {
				t.Errorf("an innocent Update of k on another goroutine failed: %v; want it to lose its race to the Upsert, retry and succeed", err)
			}
			if got, err := s.Get(ctx, "k"); err != nil || got.Value.N != 101 {
				t.Errorf("k = %+v, %v; want N = 101", got.Value, err)
			}
		})
	}
}
