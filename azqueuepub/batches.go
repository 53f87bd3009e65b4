package azqueuepub

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
)

// This file packs a batch of events (Outbox.RelayBatches) into as few
// messages as fit, and reads any message back into its events.

// NewBatches returns a publish function for Outbox.RelayBatches and
// Outbox.RelayBatchesOnce: it enqueues a batch of consecutive events of
// one partition to q in as few messages as fit in MaxMessageSize, each
// message's body the base64 of a JSON array of events (each as New's
// message holds it), in Seq order, one message after another; it returns
// once the service has accepted them all. A failure ends it with its
// error (see the package documentation), the messages enqueued before it
// staying: the relay publishes the whole batch again, and the consumer
// drops the repeats by ID. Read messages with DecodeAll. It is safe for
// concurrent use. A nil q makes every call fail with
// etagstore.ErrInvalidInput.
func NewBatches[E any](q *azqueue.QueueClient, opts *Options) func(context.Context, []etagstore.Event[E]) error {
	send := sender(q, opts, "NewBatches")
	return func(ctx context.Context, evs []etagstore.Event[E]) error {
		bodies, err := EncodeBatch(evs)
		if err != nil {
			return err
		}
		for _, body := range bodies {
			if err := send(ctx, body); err != nil {
				return err
			}
		}
		return nil
	}
}

// EncodeBatch is the bodies of the messages NewBatches enqueues for evs:
// consecutive runs of them, each the base64 of a JSON array as long as
// fits in MaxMessageSize. An event that does not fit alone matches
// etagstore.ErrTooLarge, one encoding/json cannot write
// etagstore.ErrInvalidInput, before any body is made.
func EncodeBatch[E any](evs []etagstore.Event[E]) ([]string, error) {
	var bodies []string
	var run bytes.Buffer // "[" and the events of the current body, comma-separated
	flush := func() {
		if run.Len() > 0 {
			run.WriteByte(']')
			bodies = append(bodies, base64.StdEncoding.EncodeToString(run.Bytes()))
			run.Reset()
		}
	}
	for _, ev := range evs {
		b, err := json.Marshal(message[E]{ID: ev.ID, Partition: ev.Partition, Seq: ev.Seq, Time: ev.Time, Value: ev.Value})
		if err != nil {
			return nil, fmt.Errorf("%w: azqueuepub: encode event %d of %q: %v", etagstore.ErrInvalidInput, ev.Seq, ev.Partition, err)
		}
		if n := base64.StdEncoding.EncodedLen(len(b) + 2); n > MaxMessageSize {
			return nil, fmt.Errorf("%w: azqueuepub: event %d of %q is %d bytes as a message (%d of JSON), over Azure Queue storage's %d", etagstore.ErrTooLarge, ev.Seq, ev.Partition, n, len(b), MaxMessageSize)
		}
		if run.Len() > 0 && base64.StdEncoding.EncodedLen(run.Len()+1+len(b)+1) > MaxMessageSize {
			flush()
		}
		if run.Len() == 0 {
			run.WriteByte('[')
		} else {
			run.WriteByte(',')
		}
		run.Write(b)
	}
	flush()
	return bodies, nil
}

// DecodeAll is the events a message's body holds, in order: one as New
// enqueues it, or several as NewBatches does; base64, or the JSON itself
// (a body that starts with "{" or "["). A body that is neither, one that
// holds no event (null, []), an event without an id, or a value that
// does not decode into E, matches etagstore.ErrInvalidInput.
func DecodeAll[E any](body string) ([]etagstore.Event[E], error) {
	b := bytes.TrimSpace([]byte(body))
	if len(b) == 0 || b[0] != '{' && b[0] != '[' {
		d, err := base64.StdEncoding.DecodeString(string(b))
		if err != nil {
			return nil, fmt.Errorf("%w: azqueuepub: a message of %d bytes is neither JSON nor base64: %v", etagstore.ErrInvalidInput, len(body), err)
		}
		b = bytes.TrimSpace(d)
	}
	if len(b) > 0 && b[0] == '{' {
		ev, err := Decode[E](string(b))
		if err != nil {
			return nil, err
		}
		return []etagstore.Event[E]{ev}, nil
	}
	var ms []message[E]
	if err := json.Unmarshal(b, &ms); err != nil {
		return nil, fmt.Errorf("%w: azqueuepub: decode a batch of events: %v", etagstore.ErrInvalidInput, err)
	}
	if len(ms) == 0 { // null or []: no message this package writes
		return nil, fmt.Errorf("%w: azqueuepub: the message holds no event", etagstore.ErrInvalidInput)
	}
	out := make([]etagstore.Event[E], len(ms))
	for i, m := range ms {
		if m.ID == "" {
			return nil, fmt.Errorf("%w: azqueuepub: event %d of the batch has no id", etagstore.ErrInvalidInput, i)
		}
		out[i] = etagstore.Event[E]{ID: m.ID, Partition: m.Partition, Seq: m.Seq, Time: m.Time, Value: m.Value}
	}
	return out, nil
}
