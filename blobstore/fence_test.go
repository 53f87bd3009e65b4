package blobstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// Deleting the lock blob between acquisitions (a cleanup job, a lifecycle
// rule) does not reset the fencing token: the next holder's token is above
// every earlier one, so the document earlier holders wrote accepts its
// Update, and a stale holder's older token is still refused.
func TestFenceTokenSurvivesLockBlobDeletion(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[Note](blobstore.New(c, &blobstore.Options{Prefix: "docs/"}), nil)

	if _, err := s.Create(ctx, "report", Note{Text: "draft"}); err != nil {
		t.Fatal(err)
	}
	// Three holders in turn, each writing the document under its lock.
	var last int64
	for i, text := range []string{"first", "second", "third"} {
		token := writeUnderLock(t, l, s, "report", text)
		if token <= last {
			t.Fatalf("acquisition %d: token %d, not above %d", i+1, token, last)
		}
		last = token
	}

	// Cleanup deletes the idle lock blob, and with it the stored token.
	if _, err := c.NewBlobClient("locks/report").Delete(ctx, nil); err != nil {
		t.Fatalf("delete the lock blob: %v", err)
	}

	lk, err := l.TryLock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	if lk.Token() <= last {
		t.Fatalf("after the lock blob's deletion: token %d, not above the last one before it, %d", lk.Token(), last)
	}
	want, err := s.Update(lk.Context(), "report", func(n *Note) error { n.Text = "after cleanup"; return nil })
	if err != nil {
		t.Fatalf("Update under the new lock (token %d, document written under %d) = %v, want success", lk.Token(), last, err)
	}

	// A stale holder of the last token before the deletion is refused.
	_, err = s.Update(etagstore.WithFence(ctx, last), "report", func(n *Note) error { n.Text = "stale"; return nil })
	if !errors.Is(err, etagstore.ErrFenced) {
		t.Fatalf("stale holder's Update (token %d) = %v, want ErrFenced", last, err)
	}
	if got, err := s.Get(ctx, "report"); err != nil || got != want {
		t.Fatalf("stored %+v (%v), want the new holder's %+v", got, err, want)
	}
}

// writeUnderLock takes the lock for key, updates the document key under its
// Context to text, unlocks, and returns the lock's token.
func writeUnderLock(t *testing.T, l *blobstore.Locker, s *etagstore.Store[Note], key, text string) int64 {
	t.Helper()
	lk, err := l.TryLock(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(t.Context())
	if _, err := s.Update(lk.Context(), key, func(n *Note) error { n.Text = text; return nil }); err != nil {
		t.Fatalf("Update under token %d: %v", lk.Token(), err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	return lk.Token()
}

// Tokens strictly increase over many acquisitions of one key.
func TestFenceTokensIncrease(t *testing.T) {
	ctx := t.Context()
	l, _ := newLocker(t, nil)
	var last int64
	for i := range 40 {
		lk, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if lk.Token() <= last {
			t.Fatalf("acquisition %d: token %d, not above the one before, %d", i+1, lk.Token(), last)
		}
		last = lk.Token()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A lock blob whose token an earlier version counted from 1: the next token
// is above it, so a document that recorded the old token accepts the new
// holder's writes and still refuses the old holder's.
func TestFenceTokenAfterCounter(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[Note](blobstore.New(c, &blobstore.Options{Prefix: "docs/"}), nil)
	const old = 7
	seven := "7"
	if _, err := c.NewBlockBlobClient("locks/invoice").UploadBuffer(ctx, nil, &blockblob.UploadBufferOptions{
		Metadata: map[string]*string{"fencetoken": &seven},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(etagstore.WithFence(ctx, old), "invoice", Note{Text: "counted"}); err != nil {
		t.Fatal(err)
	}
	lk, err := l.TryLock(ctx, "invoice")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	if lk.Token() <= old {
		t.Fatalf("token %d after the counter's %d", lk.Token(), old)
	}
	if _, err := s.Update(lk.Context(), "invoice", func(n *Note) error { n.Text = "clocked"; return nil }); err != nil {
		t.Fatalf("Update under the new token %d over the counter's %d = %v", lk.Token(), old, err)
	}
	if _, err := s.Update(etagstore.WithFence(ctx, old), "invoice", func(n *Note) error { n.Text = "stale"; return nil }); !errors.Is(err, etagstore.ErrFenced) {
		t.Fatalf("Update under the counter's token = %v, want ErrFenced", err)
	}
}

// The token is max(stored+1, now), now the process's clock kept between the
// Date of the storage service's answer and 2 s past it.
func TestNextToken(t *testing.T) {
	date := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) int64 { return date.Add(d).UnixMicro() }
	for _, c := range []struct {
		name     string
		stored   int64
		received time.Time
		date     *time.Time
		want     int64
	}{
		{"a fresh lock blob, a correct clock", 0, date.Add(300 * time.Millisecond), &date, at(300 * time.Millisecond)},
		{"a token counted by an earlier version", 7, date.Add(300 * time.Millisecond), &date, at(300 * time.Millisecond)},
		{"a stored token ahead of the clock", at(5 * time.Second), date.Add(300 * time.Millisecond), &date, at(5*time.Second) + 1},
		{"a clock an hour behind the service's", 0, date.Add(-time.Hour), &date, at(0)},
		{"a clock an hour ahead of the service's", 0, date.Add(time.Hour), &date, at(2 * time.Second)},
		{"a slow answer from a correct clock", 0, date.Add(2 * time.Second), &date, at(2 * time.Second)},
		{"no Date in the answer", 0, date.Add(time.Hour), nil, at(time.Hour)},
	} {
		if got := blobstore.NextToken(c.stored, c.received, c.date); got != c.want {
			t.Errorf("%s: NextToken(%d, %v, %v) = %d, want %d", c.name, c.stored, c.received, c.date, got, c.want)
		}
	}
	// A clock that stands still: tokens still increase.
	token := at(0)
	for range 100 {
		next := blobstore.NextToken(token, date, &date)
		if next <= token {
			t.Fatalf("NextToken(%d) = %d with the clock standing still", token, next)
		}
		token = next
	}
}

// A process whose clock is an hour off hands out tokens within seconds of
// the storage service's clock (Azurite's is this machine's): one ahead
// cannot push the tokens an hour up, where a deleted lock blob would
// restart below them for an hour; one behind restarts a deleted lock blob
// at the service's time, not an hour before it.
func TestFenceTokenClockSkew(t *testing.T) {
	ctx := t.Context()
	l, _ := newLocker(t, nil)

	blobstore.SetLockClock(l, func() time.Time { return time.Now().Add(time.Hour) })
	fast, err := l.TryLock(ctx, "fast")
	if err != nil {
		t.Fatal(err)
	}
	if limit := time.Now().Add(2 * time.Second).UnixMicro(); fast.Token() > limit {
		t.Errorf("clock an hour ahead: token %d, above the service's clock plus 2 s, %d", fast.Token(), limit)
	}
	_ = fast.Unlock(ctx)

	blobstore.SetLockClock(l, func() time.Time { return time.Now().Add(-time.Hour) })
	floor := time.Now().Truncate(time.Second).UnixMicro()
	slow, err := l.TryLock(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if slow.Token() < floor {
		t.Errorf("clock an hour behind: token %d, below the service's clock's second, %d", slow.Token(), floor)
	}
	_ = slow.Unlock(ctx)
}
