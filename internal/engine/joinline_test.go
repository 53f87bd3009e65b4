package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/request"
)

// A lost answer's cause joined with what ended the write after it reads
// on one line and matches both (an unknown outcome's cause, say a
// deadline that lost the answer and then ended the retries).
func TestJoinLineOneLine(t *testing.T) {
	lost := errors.New("connection reset")
	for _, tc := range []struct {
		a, b error
		want string
	}{
		{context.DeadlineExceeded, context.DeadlineExceeded, "context deadline exceeded"},
		{lost, context.DeadlineExceeded, "connection reset; context deadline exceeded"},
	} {
		cause := request.JoinLine(tc.a, tc.b)
		err := (&Delivery{op: "Update", keys: []string{"k"}}).unknown(cause)
		if s := err.Error(); strings.Contains(s, "\n") || !strings.HasSuffix(s, tc.want) {
			t.Errorf("%q: want one line ending %q", s, tc.want)
		}
		if !errors.Is(cause, tc.a) || !errors.Is(cause, tc.b) || !errors.Is(err, driver.ErrOutcomeUnknown) {
			t.Errorf("%v does not match its parts", err)
		}
	}
	if request.JoinLine(nil, lost) != lost || request.JoinLine(lost, nil) != lost {
		t.Error("joinLine with one error is not that error")
	}
}
