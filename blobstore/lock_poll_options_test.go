package blobstore_test

import (
	"testing"
	"time"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// PollMax: zero (or negative) is the default, 1s or PollInitial if longer;
// one below PollInitial is raised to PollInitial, not replaced by 1s.
func TestLockPollBounds(t *testing.T) {
	c := azuritetest.NewContainer(t)
	const ms = time.Millisecond
	for _, tc := range []struct {
		initial, max         time.Duration
		wantInitial, wantMax time.Duration
	}{
		{0, 0, 25 * ms, time.Second},
		{0, -1, 25 * ms, time.Second},
		{100 * ms, 0, 100 * ms, time.Second},
		{2 * time.Second, 0, 2 * time.Second, 2 * time.Second},
		{100 * ms, 10 * ms, 100 * ms, 100 * ms},
		{0, 10 * ms, 25 * ms, 25 * ms},
		{10 * ms, 300 * ms, 10 * ms, 300 * ms},
		{10 * ms, 10 * ms, 10 * ms, 10 * ms},
	} {
		l, err := blobstore.NewLocker(c, &blobstore.LockOptions{PollInitial: tc.initial, PollMax: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		o := blobstore.LockerOptions(l)
		if o.PollInitial != tc.wantInitial || o.PollMax != tc.wantMax {
			t.Errorf("PollInitial %v, PollMax %v: got %v and %v, want %v and %v", tc.initial, tc.max, o.PollInitial, o.PollMax, tc.wantInitial, tc.wantMax)
		}
	}
}
