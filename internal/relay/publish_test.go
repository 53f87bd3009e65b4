package relay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// inOrder hands a run's events out in batches of Size, InFlight calls at
// once, and reports how many events from the first landed before the
// first call that failed.
func TestPublisherInOrder(t *testing.T) {
	errFail := errors.New("refused")
	tests := []struct {
		name          string
		size, flight  int
		events        int
		failAt        int // the first event of the call that fails (-1: none)
		wantLanded    int
		wantCallFirst []int // with InFlight 1: each call's first event, in order
	}{
		{"singly", 1, 1, 4, -1, 4, []int{0, 1, 2, 3}},
		{"batches", 3, 1, 7, -1, 7, []int{0, 3, 6}},
		{"singly, the third fails", 1, 1, 5, 2, 2, []int{0, 1, 2}},
		{"batches, the second fails", 2, 1, 6, 2, 2, []int{0, 2}},
		{"window, the third call fails", 2, 3, 10, 4, 4, nil},
		{"window, none fails", 2, 4, 9, -1, 9, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs := make([]int, tc.events)
			for i := range evs {
				evs[i] = i
			}
			var mu sync.Mutex
			var firsts []int
			p := Publisher[int]{Size: tc.size, Publish: func(_ context.Context, batch []int) error {
				mu.Lock()
				firsts = append(firsts, batch[0])
				mu.Unlock()
				if len(batch) > tc.size || cap(batch) != len(batch) {
					t.Errorf("batch %v: len %d cap %d, want at most %d and full", batch, len(batch), cap(batch), tc.size)
				}
				if tc.failAt >= 0 && batch[0] == tc.failAt {
					return errFail
				}
				return nil
			}}
			var progress []int
			landed, err := p.inOrder(t.Context(), evs, tc.flight, func(k int) bool { progress = append(progress, k); return true })
			if landed != tc.wantLanded || (tc.failAt >= 0) != errors.Is(err, errFail) {
				t.Errorf("inOrder = %d, %v; want %d, failing: %v", landed, err, tc.wantLanded, tc.failAt >= 0)
			}
			// progress grows; after a failure it may stop short (no more is
			// reported once a call failed), otherwise it reaches the end.
			last := 0
			if len(progress) > 0 {
				last = progress[len(progress)-1]
			}
			if !slices.IsSorted(progress) || last > tc.wantLanded || tc.failAt < 0 && last != tc.wantLanded {
				t.Errorf("progress %v: want growing, up to %d", progress, tc.wantLanded)
			}
			if tc.wantCallFirst != nil && !slices.Equal(firsts, tc.wantCallFirst) {
				t.Errorf("calls began at %v, want %v", firsts, tc.wantCallFirst)
			}
		})
	}
}

// A panic in publish is the call's error, on one line.
func TestPublisherPanicIsError(t *testing.T) {
	p := Singly(func(context.Context, int) error { panic("line one\nline two") })
	landed, err := p.inOrder(t.Context(), []int{1, 2}, 1, func(int) bool { return true })
	if landed != 0 || err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("inOrder = %d, %v; want 0 and a one-line error", landed, err)
	}
}
