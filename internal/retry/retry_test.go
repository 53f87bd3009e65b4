package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sleeps is a Clock that stands still and records the sleeps asked of it.
type sleeps []time.Duration

func (s *sleeps) Now() time.Time { return time.Time{} }

func (s *sleeps) Sleep(ctx context.Context, d time.Duration) error {
	*s = append(*s, d)
	return ctx.Err()
}

// hooks records the attempts the loop reports.
type hooks struct{ attempts []int }

func (h *hooks) Attempted(_ context.Context, n int, _ error, _ time.Duration) {
	h.attempts = append(h.attempts, n)
}

func (h *hooks) Retrying(context.Context, string, int, time.Duration, error) {}

var errLost = errors.New("lost")

// script is a Step answering each call with the next of nexts, then Stop.
func script(nexts ...Next) Step {
	return func(context.Context, int) (Next, error) {
		if len(nexts) == 0 {
			return Stop, nil
		}
		n := nexts[0]
		nexts = nexts[1:]
		return n, errLost
	}
}

func TestLoopRun(t *testing.T) {
	policy := Policy{InitialInterval: time.Millisecond, MaxInterval: 8 * time.Millisecond, MaxElapsedTime: time.Hour}
	tests := []struct {
		name         string
		policy       Policy
		made         int
		steps        []Next
		wantN        int
		wantErr      error
		wantReported []int
		wantSleeps   int
	}{
		{"stops at once", policy, 0, nil, 1, nil, []int{1}, 0},
		{"redo does not count", policy, 0, []Next{Redo, Redo}, 1, nil, []int{1}, 0},
		{"at once sleeps not", policy, 0, []Next{AtOnce, AtOnce}, 3, nil, []int{1, 2, 3}, 0},
		{"after a loss it sleeps", policy, 0, []Next{AfterLoss, AfterPause}, 3, nil, []int{1, 2, 3}, 2},
		{"made counts first", policy, 2, []Next{AtOnce}, 4, nil, []int{3, 4}, 0},
		{"max attempts ends it", Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}, 0,
			[]Next{AfterLoss, AfterLoss, AfterLoss}, 2, errLost, []int{1, 2}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock, h := &sleeps{}, &hooks{}
			n, err := Loop{Policy: tt.policy, Clock: clock, Hooks: h, Made: tt.made}.Run(t.Context(), script(tt.steps...))
			if n != tt.wantN || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Run = %d, %v; want %d, %v", n, err, tt.wantN, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantReported, h.attempts); diff != "" {
				t.Errorf("attempts reported (-want +got):\n%s", diff)
			}
			if len(*clock) != tt.wantSleeps {
				t.Errorf("slept %d times, want %d", len(*clock), tt.wantSleeps)
			}
		})
	}
}

// After waiting for the key a lost race is tried again without a pause;
// Shrink lowers the cap after a loss only.
func TestLoopRunAfterWaitAndShrink(t *testing.T) {
	clock, h := &sleeps{}, &hooks{}
	shrunk := 0
	shrink := func(limit, took, waited time.Duration) time.Duration { shrunk++; return 0 }
	l := Loop{Policy: Policy{InitialInterval: time.Second, MaxInterval: time.Second, MaxElapsedTime: time.Hour}, Clock: clock, Hooks: h, Shrink: shrink}
	if _, err := l.Run(t.Context(), script(AfterWait, AfterLoss, AfterPause)); err != nil {
		t.Fatal(err)
	}
	if len(*clock) != 3 {
		t.Fatalf("slept %v, want 3 sleeps", *clock)
	}
	if diff := cmp.Diff([]time.Duration{0, 0, (*clock)[2]}, []time.Duration(*clock)); diff != "" || shrunk != 1 {
		t.Errorf("sleeps (-want +got):\n%s; shrunk %d times, want 1", diff, shrunk)
	}
}

// A done context ends the loop with ctx.Err(), unwrapped.
func TestLoopRunCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	n, err := Loop{Policy: Policy{}, Clock: &sleeps{}, Hooks: &hooks{}}.Run(ctx, script())
	if n != 0 || err != context.Canceled {
		t.Errorf("Run = %d, %v; want 0, context.Canceled", n, err)
	}
}
