package azqueuepub_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

type OrderPlaced struct {
	Order string `json:"order"`
	Total int64  `json:"total"`
}

// allSentinels are etagstore's error classes: a failure matches one.
var allSentinels = []error{etagstore.ErrNotFound, etagstore.ErrStorageNotFound, etagstore.ErrExists, etagstore.ErrConflict,
	etagstore.ErrETagRequired, etagstore.ErrInvalidKey, etagstore.ErrTooLarge, etagstore.ErrInvalidInput, etagstore.ErrFenced,
	etagstore.ErrLocked, etagstore.ErrLockLost, etagstore.ErrOutcomeUnknown, etagstore.ErrUnavailable}

// wantSentinel fails unless err matches want and no other sentinel, and
// prints as one line, starting with "etagstore:" or one of prefixes.
func wantSentinel(t *testing.T, what string, err, want error, prefixes ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
		return
	}
	for _, s := range allSentinels {
		if s != want && errors.Is(err, s) {
			t.Errorf("%s: %v matches %v too", what, err, s)
		}
	}
	azuritetest.CheckOneLine(t, what, err, prefixes...)
}

// drain dequeues every message of q and deletes it: the messages in the
// order the service handed them out. Azurite enqueues synchronously: a
// message is visible once its enqueue has returned, so the first empty
// answer ends the queue.
func drain(t *testing.T, q *azqueue.QueueClient) []azqueue.DequeuedMessage {
	t.Helper()
	var out []azqueue.DequeuedMessage
	n := int32(32)
	for range 1000 { // a bound: 32 000 messages
		resp, err := q.DequeueMessages(t.Context(), &azqueue.DequeueMessagesOptions{NumberOfMessages: &n})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Messages) == 0 {
			return out
		}
		for _, m := range resp.Messages {
			out = append(out, *m)
			if _, err := q.DeleteMessage(t.Context(), *m.MessageID, *m.PopReceipt, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("the queue does not empty")
	return nil
}

func event(seq int64, v OrderPlaced) etagstore.Event[OrderPlaced] {
	return etagstore.Event[OrderPlaced]{ID: fmt.Sprintf("id-%d", seq), Partition: "shop/", Seq: seq,
		Time: time.Date(2026, 11, 27, 17, 28, 9, 123456700, time.UTC), Value: v}
}

// Published events arrive as one message each, in the order published,
// their body the base64 of the event's JSON with its ID.
func TestPublishDequeue(t *testing.T) {
	t.Parallel()
	q := azuritetest.NewQueue(t)
	pub := azqueuepub.New[OrderPlaced](q, nil)
	for i := range int64(5) {
		if err := pub(t.Context(), event(i+1, OrderPlaced{Order: fmt.Sprint("o-", i+1), Total: 10 * (i + 1)})); err != nil {
			t.Fatal(err)
		}
	}
	msgs := drain(t, q)
	if len(msgs) != 5 {
		t.Fatalf("%d messages, want 5", len(msgs))
	}
	raw, err := base64.StdEncoding.DecodeString(*msgs[0].MessageText)
	if err != nil {
		t.Fatalf("the body is not base64: %v", err)
	}
	if got, want := string(raw), `{"id":"id-1","partition":"shop/","seq":1,"time":"2026-11-27T17:28:09.1234567Z","value":{"order":"o-1","total":10}}`; got != want {
		t.Errorf("the body is the base64 of\n%s\nwant\n%s", got, want)
	}
	for i, m := range msgs {
		ev, err := azqueuepub.Decode[OrderPlaced](*m.MessageText)
		if err != nil {
			t.Fatal(err)
		}
		// Azurite hands messages out in the order they were enqueued;
		// Azure's order is best effort (see the package documentation).
		want := event(int64(i)+1, OrderPlaced{Order: fmt.Sprint("o-", i+1), Total: 10 * int64(i+1)})
		if !ev.Time.Equal(want.Time) || ev.ID != want.ID || ev.Seq != want.Seq || ev.Partition != want.Partition || ev.Value != want.Value {
			t.Errorf("message %d is %+v, want %+v", i, ev, want)
		}
	}
}

func TestMissingQueue(t *testing.T) {
	t.Parallel()
	pub := azqueuepub.New[OrderPlaced](azuritetest.MissingQueue(t), nil)
	err := pub(t.Context(), event(1, OrderPlaced{Order: "o-1"}))
	wantSentinel(t, "publish to a missing queue", err, etagstore.ErrStorageNotFound)
	if err != nil && !strings.Contains(err.Error(), "the queue does not exist") {
		t.Errorf("%v: want it to say the queue does not exist", err)
	}
}

func TestNilQueue(t *testing.T) {
	err := azqueuepub.New[OrderPlaced](nil, nil)(t.Context(), event(1, OrderPlaced{}))
	wantSentinel(t, "publish with a nil client", err, etagstore.ErrInvalidInput)
}

// An event whose message would be over 64 KiB is refused before it is
// sent; one of etagstore.MaxEventSize fits.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	q := azuritetest.NewQueue(t)
	pub := azqueuepub.New[OrderPlaced](q, nil)
	big := event(1, OrderPlaced{Order: strings.Repeat("x", 49<<10)})
	wantSentinel(t, "publish 49 KiB", pub(t.Context(), big), etagstore.ErrTooLarge)
	if _, err := azqueuepub.Encode(big); !errors.Is(err, etagstore.ErrTooLarge) {
		t.Errorf("Encode of 49 KiB: %v, want ErrTooLarge", err)
	}

	// The largest event Emit lets through: MaxEventSize bytes of JSON.
	fits := event(2, OrderPlaced{})
	body, err := azqueuepub.Encode(fits)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(body)
	fits.Value.Order = strings.Repeat("y", etagstore.MaxEventSize-len(raw))
	if body, err = azqueuepub.Encode(fits); err != nil {
		t.Fatalf("an event of MaxEventSize bytes of JSON: %v", err)
	}
	if raw, _ := base64.StdEncoding.DecodeString(body); len(raw) != etagstore.MaxEventSize || len(body) != azqueuepub.MaxMessageSize {
		t.Fatalf("%d bytes of JSON, %d of message; want %d and %d", len(raw), len(body), etagstore.MaxEventSize, azqueuepub.MaxMessageSize)
	}
	if err := pub(t.Context(), fits); err != nil {
		t.Fatalf("publish an event of MaxEventSize: %v", err)
	}
	msgs := drain(t, q)
	if len(msgs) != 1 || *msgs[0].MessageText != body {
		t.Fatalf("%d messages, want the one that fits", len(msgs))
	}
}

// Throttling, server failures and lost answers are ErrUnavailable; a lost
// answer may leave the message enqueued, as many times as the SDK tried,
// each copy with the event's ID. The faults come from a proxy in front of
// Azurite, on writes only: the test peeks through it.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		faults   storetest.Faults
		counted  string // the proxy's name of the fault (Counts)
		enqueued bool
	}{
		{"503 ServerBusy", storetest.Faults{Unavailable: 1}, "503", false},
		{"500", storetest.Faults{ServerError: 1}, "500", false},
		{"answer dropped", storetest.Faults{DropAfterCommit: 1}, "drop-after-commit", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Queue"), c.faults)
			q := azuritetest.NewQueueVia(t, proxy.URL())
			err := azqueuepub.New[OrderPlaced](q, nil)(t.Context(), event(7, OrderPlaced{Order: "o-7"}))
			wantSentinel(t, c.name, err, etagstore.ErrUnavailable)
			n := int32(32)
			peek, err := q.PeekMessages(t.Context(), &azqueue.PeekMessagesOptions{NumberOfMessages: &n})
			if err != nil {
				t.Fatal(err)
			}
			tries := proxy.Counts()[c.counted]
			switch {
			case !c.enqueued && len(peek.Messages) != 0:
				t.Errorf("%d messages enqueued, want none", len(peek.Messages))
			case c.enqueued && len(peek.Messages) != tries:
				t.Errorf("%d messages enqueued, want one per try (%d)", len(peek.Messages), tries)
			}
			for _, m := range peek.Messages {
				if ev, err := azqueuepub.Decode[OrderPlaced](*m.MessageText); err != nil || ev.ID != "id-7" {
					t.Errorf("a copy holds %+v (%v), want event id-7", ev, err)
				}
			}
		})
	}
}

// A message lives for Options.TimeToLive, rounded up to a second; a
// negative one never expires.
func TestTimeToLive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ttl  time.Duration
		want time.Duration // 0: never expires
	}{
		{0, 7 * 24 * time.Hour},
		{90 * time.Minute, 90 * time.Minute},
		{1500 * time.Millisecond, 2 * time.Second},
		{-1, 0},
	} {
		q := azuritetest.NewQueue(t)
		if err := azqueuepub.New[OrderPlaced](q, &azqueuepub.Options{TimeToLive: c.ttl})(t.Context(), event(1, OrderPlaced{})); err != nil {
			t.Fatal(err)
		}
		n := int32(1)
		peek, err := q.PeekMessages(t.Context(), &azqueue.PeekMessagesOptions{NumberOfMessages: &n})
		if err != nil || len(peek.Messages) != 1 {
			t.Fatalf("peek: %d messages, %v", len(peek.Messages), err)
		}
		m := peek.Messages[0]
		lives := m.ExpirationTime.Sub(*m.InsertionTime)
		switch {
		case c.want == 0 && m.ExpirationTime.Year() < 9999:
			t.Errorf("TimeToLive %s: the message expires at %s, want never (9999-12-31)", c.ttl, m.ExpirationTime)
		case c.want != 0 && lives != c.want:
			t.Errorf("TimeToLive %s: the message lives %s, want %s", c.ttl, lives, c.want)
		}
	}
}

func TestDecode(t *testing.T) {
	ev := event(3, OrderPlaced{Order: "o-3", Total: 30})
	body, err := azqueuepub.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(body)
	wrapped := body[:20] + "\r\n" + body[20:] + "\n" // base64 broken over lines, as some tools write it
	for name, b := range map[string]string{"base64": body, "JSON": string(raw), "JSON with blanks": " \n" + string(raw), "base64 over lines": wrapped} {
		got, err := azqueuepub.Decode[OrderPlaced](b)
		if err != nil || got.ID != ev.ID || got.Seq != ev.Seq || got.Partition != ev.Partition || !got.Time.Equal(ev.Time) || got.Value != ev.Value {
			t.Errorf("Decode of the %s: %+v, %v; want %+v", name, got, err, ev)
		}
	}
	for name, b := range map[string]string{
		"empty":           "",
		"not base64":      "not an event!",
		"base64 of text":  base64.StdEncoding.EncodeToString([]byte("hello")),
		"no id":           `{"partition":"shop/","seq":1,"value":{}}`,
		"value of a type": `{"id":"x","seq":1,"value":"a string, not an OrderPlaced"}`,
		"truncated JSON":  string(raw[:len(raw)-2]),
	} {
		_, err := azqueuepub.Decode[OrderPlaced](b)
		wantSentinel(t, "Decode of "+name, err, etagstore.ErrInvalidInput)
	}
	// A value encoding/json cannot write is refused before it is sent.
	_, err = azqueuepub.Encode(etagstore.Event[func()]{ID: "f", Value: func() {}})
	wantSentinel(t, "Encode of a func", err, etagstore.ErrInvalidInput)
}

// A string XML cannot carry (U+FFFE, U+FFFF; encoding/xml would write
// U+FFFD) arrives whole: the body is base64.
func TestNonXMLCharacters(t *testing.T) {
	t.Parallel()
	q := azuritetest.NewQueue(t)
	ev := event(1, OrderPlaced{Order: "o-\ufffe\uffff-<&>\u2028"})
	if err := azqueuepub.New[OrderPlaced](q, nil)(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	msgs := drain(t, q)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	got, err := azqueuepub.Decode[OrderPlaced](*msgs[0].MessageText)
	if err != nil || got.Value != ev.Value {
		t.Errorf("got %q (%v), want %q", got.Value.Order, err, ev.Value.Order)
	}
}
