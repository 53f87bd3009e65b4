package azqueuepub_test

import (
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
)

// A message that is the base64 of JSON null is neither an event nor a
// batch of events: DecodeAll must refuse it as Decode does
// (ErrInvalidInput), not hand back zero events and nil.
func TestDecodeAllNullIsNoEvent(t *testing.T) {
	body := base64.StdEncoding.EncodeToString([]byte("null"))
	if _, err := azqueuepub.Decode[OrderPlaced](body); err == nil {
		t.Fatalf("Decode(base64 null) = nil error")
	}
	evs, err := azqueuepub.DecodeAll[OrderPlaced](body)
	if err == nil {
		t.Fatalf("DecodeAll(base64 null) = %d events, nil error; want ErrInvalidInput", len(evs))
	}
	wantSentinel(t, fmt.Sprintf("DecodeAll(%q)", body), err, etagstore.ErrInvalidInput, "azqueuepub:")
}
