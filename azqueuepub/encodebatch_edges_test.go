package azqueuepub_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
)

// sized is event seq whose message JSON (as Encode writes it, before
// base64) is exactly n bytes.
func sized(t *testing.T, seq int64, n int) etagstore.Event[OrderPlaced] {
	t.Helper()
	ev := event(seq, OrderPlaced{})
	body, err := azqueuepub.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(body)
	if n < len(raw) {
		t.Fatalf("an event's JSON is %d bytes at least", len(raw))
	}
	ev.Value.Order = strings.Repeat("x", n-len(raw))
	return ev
}

// EncodeBatch at the 64 KiB boundary: an array's base64 is 4⌈n/3⌉ for n
// bytes of JSON, so a body holds at most 49,152 bytes of JSON, brackets
// and commas included. One event of 49,150 bytes fits alone (a body of
// exactly 65,536 characters), 49,151 does not (ErrTooLarge); two events
// whose "[a,b]" is 49,152 bytes share a body, one byte more splits them.
// Every body is at most MaxMessageSize and decodes back in order; an
// empty batch is no body.
func TestEncodeBatchBoundary(t *testing.T) {
	bodies, err := azqueuepub.EncodeBatch([]etagstore.Event[OrderPlaced]{sized(t, 1, 49150)})
	if err != nil || len(bodies) != 1 || len(bodies[0]) != azqueuepub.MaxMessageSize {
		t.Errorf("one event of 49,150 bytes: %d bodies, %v; want one body of exactly %d", len(bodies), err, azqueuepub.MaxMessageSize)
	}
	_, err = azqueuepub.EncodeBatch([]etagstore.Event[OrderPlaced]{sized(t, 1, 49151)})
	wantSentinel(t, "one event of 49,151 bytes", err, etagstore.ErrTooLarge, "azqueuepub:")
	for _, tc := range []struct {
		a, b   int
		bodies int
	}{
		{24575, 24574, 1}, // 1+24575+1+24574+1 = 49152
		{24575, 24575, 2}, // 49153
		{200, 48949, 1},   // 49152
		{200, 48950, 2},   // 49153
	} {
		evs := []etagstore.Event[OrderPlaced]{sized(t, 1, tc.a), sized(t, 2, tc.b)}
		bodies, err := azqueuepub.EncodeBatch(evs)
		if err != nil || len(bodies) != tc.bodies {
			t.Errorf("events of %d and %d bytes: %d bodies, %v; want %d", tc.a, tc.b, len(bodies), err, tc.bodies)
			continue
		}
		var seqs []int64
		for _, body := range bodies {
			if len(body) > azqueuepub.MaxMessageSize {
				t.Errorf("events of %d and %d bytes: a body of %d characters", tc.a, tc.b, len(body))
			}
			part, err := azqueuepub.DecodeAll[OrderPlaced](body)
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, seqsOf(part)...)
		}
		if fmt.Sprint(seqs) != "[1 2]" {
			t.Errorf("events of %d and %d bytes decode as Seqs %v", tc.a, tc.b, seqs)
		}
	}
	if bodies, err := azqueuepub.EncodeBatch[OrderPlaced](nil); len(bodies) != 0 || err != nil {
		t.Errorf("EncodeBatch(nil) = %q, %v; want no body", bodies, err)
	}
}
