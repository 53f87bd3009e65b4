package request

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/etagstore/etagstore/driver"
)

func TestEnd(t *testing.T) {
	lost := errors.New("connection reset")
	exists := driver.Errorf(driver.ErrExists, "create %q", "k")
	tests := []struct {
		name      string
		err       error
		unsettled error
		raced     bool
		want      error  // matched with errors.Is; nil: nil
		text      string // the error's text contains it
	}{
		{"landed", nil, lost, true, nil, ""},
		{"as it is", exists, nil, false, driver.ErrExists, "create"},
		{"unsettled", context.DeadlineExceeded, lost, false, driver.ErrOutcomeUnknown, "connection reset; context deadline exceeded"},
		{"unsettled, already unknown", &driver.OutcomeUnknownError{Op: "update", Key: "k", Cause: lost}, lost, false, driver.ErrOutcomeUnknown, "connection reset"},
		{"lost every race", exists, nil, true, driver.ErrConflict, "lost every race, the last refused as"},
		{"raced, then a conflict", driver.ErrConflict, nil, true, driver.ErrConflict, ""},
		{"raced, then something else", driver.ErrUnavailable, nil, true, driver.ErrUnavailable, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := End("update", "k", tt.err, tt.unsettled, tt.raced)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("End = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) || strings.Contains(err.Error(), "\n") {
				t.Errorf("End = %q; want one line matching %v, containing %q", err, tt.want, tt.text)
			}
		})
	}
}
