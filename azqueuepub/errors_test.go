package azqueuepub

import (
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// The service's own refusals map as New's do, for the answers New never
// provokes itself: a body over 64 KiB (New refuses it before sending),
// and a malformed request.
func TestServiceRefusals(t *testing.T) {
	q := azuritetest.NewQueue(t)
	_, err := q.EnqueueMessage(t.Context(), strings.Repeat("x", MaxMessageSize+1), nil)
	err = mapError("q", err)
	if !errors.Is(err, etagstore.ErrTooLarge) || errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("a message over 64 KiB: %v, want ErrTooLarge alone", err)
	}
	azuritetest.CheckOneLine(t, "too large", err)

	vis := int32(20)
	ttl := int32(10) // visible only after it expired: refused
	_, err = q.EnqueueMessage(t.Context(), "x", &azqueue.EnqueueMessageOptions{TimeToLive: &ttl, VisibilityTimeout: &vis})
	err = mapError("q", err)
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("a visibility past the time to live: %v, want ErrInvalidInput", err)
	}
	azuritetest.CheckOneLine(t, "malformed", err)
}
