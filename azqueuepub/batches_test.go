package azqueuepub_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// seqsOf is the Seqs of evs, in order.
func seqsOf(evs []etagstore.Event[OrderPlaced]) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

// A batch goes in as few messages as fit: 100 small events in one, 5 of
// about 20 KiB two to a message (2, 2, 1), each body the base64 of a
// JSON array; DecodeAll gives the events back in order, equal to those
// published.
func TestPublishBatches(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 20<<10)
	for _, tc := range []struct {
		name     string
		n        int
		order    string
		messages []int // events per message
	}{
		{"100 small", 100, "o", []int{100}},
		{"5 of 20 KiB", 5, big, []int{2, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := azuritetest.NewQueue(t)
			var evs []etagstore.Event[OrderPlaced]
			for i := range tc.n {
				evs = append(evs, event(int64(i)+1, OrderPlaced{Order: fmt.Sprint(tc.order, i), Total: int64(i)}))
			}
			if err := azqueuepub.NewBatches[OrderPlaced](q, nil)(t.Context(), evs); err != nil {
				t.Fatal(err)
			}
			var got []etagstore.Event[OrderPlaced]
			var per []int
			for _, m := range drain(t, q) {
				raw, err := base64.StdEncoding.DecodeString(*m.MessageText)
				if err != nil || !strings.HasPrefix(string(raw), `[{"id":`) {
					t.Fatalf("a body is not the base64 of a JSON array of events: %.40q (%v)", raw, err)
				}
				part, err := azqueuepub.DecodeAll[OrderPlaced](*m.MessageText)
				if err != nil {
					t.Fatal(err)
				}
				per = append(per, len(part))
				got = append(got, part...)
			}
			if !slices.Equal(per, tc.messages) {
				t.Errorf("events per message %v, want %v", per, tc.messages)
			}
			if len(got) != len(evs) {
				t.Fatalf("%d events dequeued, want %d", len(got), len(evs))
			}
			for i, ev := range got {
				w := evs[i]
				if ev.ID != w.ID || ev.Seq != w.Seq || ev.Partition != w.Partition || !ev.Time.Equal(w.Time) || ev.Value != w.Value {
					t.Errorf("event %d is %+v, want %+v", i, ev, w)
				}
			}
		})
	}
}

// An event too large for a message on its own fails the batch with
// ErrTooLarge before anything is enqueued; a nil queue is
// ErrInvalidInput.
func TestPublishBatchesRefusals(t *testing.T) {
	t.Parallel()
	q := azuritetest.NewQueue(t)
	evs := []etagstore.Event[OrderPlaced]{event(1, OrderPlaced{Order: "a"}), event(2, OrderPlaced{Order: strings.Repeat("x", 49<<10)})}
	err := azqueuepub.NewBatches[OrderPlaced](q, nil)(t.Context(), evs)
	wantSentinel(t, "a batch with an event over 64 KiB as a message", err, etagstore.ErrTooLarge, "azqueuepub:")
	if msgs := drain(t, q); len(msgs) != 0 {
		t.Errorf("%d messages enqueued by the refused batch", len(msgs))
	}
	err = azqueuepub.NewBatches[OrderPlaced](nil, nil)(t.Context(), evs[:1])
	wantSentinel(t, "NewBatches(nil)", err, etagstore.ErrInvalidInput, "azqueuepub:")
}

// DecodeAll reads every form a message takes: New's base64 of one
// event, NewBatches' base64 of an array, and either as plain JSON; a
// body that is none, or an event without an id, is ErrInvalidInput.
func TestDecodeAll(t *testing.T) {
	one, err := azqueuepub.Encode(event(7, OrderPlaced{Order: "a"}))
	if err != nil {
		t.Fatal(err)
	}
	many, err := azqueuepub.EncodeBatch([]etagstore.Event[OrderPlaced]{event(8, OrderPlaced{Order: "b"}), event(9, OrderPlaced{Order: "c"})})
	if err != nil || len(many) != 1 {
		t.Fatalf("EncodeBatch = %d bodies, %v; want 1", len(many), err)
	}
	plain := func(body string) string {
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, body string
		seqs       []int64
	}{
		{"New's, base64", one, []int64{7}},
		{"New's, JSON", plain(one), []int64{7}},
		{"NewBatches', base64", many[0], []int64{8, 9}},
		{"NewBatches', JSON", " " + plain(many[0]), []int64{8, 9}},
	} {
		evs, err := azqueuepub.DecodeAll[OrderPlaced](tc.body)
		if err != nil || !slices.Equal(seqsOf(evs), tc.seqs) {
			t.Errorf("%s: DecodeAll = %v, %v; want Seqs %v", tc.name, seqsOf(evs), err, tc.seqs)
		}
	}
	for _, body := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte(`[{"seq":1}]`)), `[{"id":"x","value":"not an object"}]`} {
		_, err := azqueuepub.DecodeAll[OrderPlaced](body)
		wantSentinel(t, fmt.Sprintf("DecodeAll(%.30q)", body), err, etagstore.ErrInvalidInput, "azqueuepub:")
	}
}
