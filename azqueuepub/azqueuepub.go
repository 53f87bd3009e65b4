// Package azqueuepub publishes an etagstore Outbox's events to Azure Queue
// storage: New is the publish function Outbox.Relay and Outbox.RelayOnce
// take, NewBatches the one Outbox.RelayBatches takes, and Decode (one
// event) and DecodeAll (any message) read a message back into its events
// on the consumer's side.
//
//	pub := azqueuepub.New[OrderPlaced](queue, nil)
//	go events.Relay(ctx, pub, nil)
//
//	// the consumer:
//	resp, err := queue.DequeueMessages(ctx, nil)
//	for _, m := range resp.Messages {
//		ev, err := azqueuepub.Decode[OrderPlaced](*m.MessageText)
//		… handle ev once per ev.ID, then DeleteMessage …
//	}
//
// # The message
//
// With New, one event is one message. Its body is the event as JSON,
// encoded in base64 (standard alphabet, padded):
//
//	base64({"id":"9f2c…","partition":"pk/","seq":42,"time":"2026-11-27T17:28:09.1234567Z","value":{…}})
//
// id is the event's ID, the same on every delivery of the event: a
// consumer drops repeats by it. partition and seq place the event among
// its partition's events (seq is 1, 2, 3… in commit order), time is when
// it was emitted (RFC 3339), and value is the event's value as
// encoding/json writes it.
//
// Base64, because Azure Functions' queue trigger expects it by default
// (host.json's "messageEncoding": "base64"), as the older Azure Storage
// SDKs wrote it (the current .NET and Java clients read it when set to
// QueueMessageEncoding.Base64; their default is none), and because a
// message body travels inside XML, which cannot carry every character a
// JSON string may hold (U+FFFE, U+FFFF). Decode accepts both forms: the
// base64 this package writes, and the JSON itself (a body that starts
// with "{", which base64 never does), as Azure Functions hands a decoded
// message to its handler.
//
// An event's JSON is at most etagstore.MaxEventSize (48 KiB; Emit refuses
// a larger one with ErrTooLarge), so its base64 fits Azure Queue
// storage's 64 KiB message (MaxMessageSize).
//
// # Order and repeats
//
// Relay publishes a partition's events one at a time, in Seq order, each
// after the previous one was enqueued: the queue receives them in commit
// order. Azure Queue storage does not promise to hand them out in that
// order (a message whose visibility timeout lapses comes back later, and
// the service's order is best effort), and the relay publishes at least
// once: a consumer that needs order compares Seq within a partition, and
// every consumer drops an ID it has handled.
//
// Each publish is one request (Azure Queue storage enqueues one message
// at a time), and Relay waits for each before the next: a relay moves
// about one event per round trip to the queue.
//
// # Batches
//
// NewBatches, with Outbox.RelayBatches, enqueues a batch of a partition's
// consecutive events (up to OutboxOptions.Batch, 32 by default) in as few
// messages as fit in 64 KiB, one after another, each body the base64 of
// a JSON array of events in Seq order:
//
//	base64([{"id":"9f2c…","partition":"pk/","seq":42,…},{"id":"a071…","partition":"pk/","seq":43,…}])
//
// The order is kept as with New (one call at a time; a failed call is
// made again whole), and a relay moves about a batch per round trip.
// DecodeAll reads both forms, so a consumer may read a queue that either
// publisher fills.
//
// # Errors
//
// A failed publish matches one of etagstore's sentinels:
//
//   - etagstore.ErrStorageNotFound: the queue does not exist (404
//     QueueNotFound), or is being deleted (409 QueueBeingDeleted) or
//     disabled (409 QueueDisabled): create it; no retry changes that.
//   - etagstore.ErrTooLarge: the message is over 64 KiB, refused before it
//     is sent, or the service's 413 RequestBodyTooLarge or 400
//     MessageTooLarge.
//   - etagstore.ErrUnavailable: the service throttled the request (503
//     ServerBusy: refused, not enqueued), failed (any other 5xx, 429), or
//     gave no answer (a connection reset), after the SDK's own retries:
//     try again (Relay does, after a backoff). After anything but
//     ServerBusy the message may have been enqueued, even more than once
//     (the SDK retries an enqueue whose answer it lost); publishing again
//     is safe, as the consumer drops the repeat by ID.
//   - etagstore.ErrInvalidInput: any other 400 (a malformed request), a
//     value encoding/json cannot write, or a nil queue client.
//
// A refusal of the credentials (403) matches none: it is the Azure SDK's
// *azcore.ResponseError, reachable with errors.As, as is the SDK's error
// behind every sentinel. A done context is its own error
// (context.Canceled, context.DeadlineExceeded). Errors print as one line:
//
//	etagstore: storage not found: azqueuepub: enqueue "orders": the queue does not exist (404 QueueNotFound, request 1c0f…)
package azqueuepub

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azerr"
)

// MaxMessageSize is the largest message Azure Queue storage takes: 64 KiB.
const MaxMessageSize = 64 << 10

// Options configure a publisher. Nil means the defaults.
type Options struct {
	// TimeToLive is how long a message waits in the queue to be consumed
	// before the service deletes it, rounded up to a second. Zero is the
	// service's default, 7 days; negative, never: a message then stays
	// until a consumer deletes it.
	TimeToLive time.Duration
}

// New returns a publish function for Outbox.Relay and Outbox.RelayOnce:
// it enqueues an event to q as one message (see the package
// documentation for the body), and returns once the service has
// accepted it. It is safe for concurrent use. A nil q makes every call
// fail with etagstore.ErrInvalidInput.
func New[E any](q *azqueue.QueueClient, opts *Options) func(context.Context, etagstore.Event[E]) error {
	send := sender(q, opts, "New")
	return func(ctx context.Context, ev etagstore.Event[E]) error {
		body, err := Encode(ev)
		if err != nil {
			return err
		}
		return send(ctx, body)
	}
}

// sender enqueues one message body to q with opts, its error mapped to
// the sentinels; with a nil q every call fails with
// etagstore.ErrInvalidInput, naming constructor.
func sender(q *azqueue.QueueClient, opts *Options, constructor string) func(ctx context.Context, body string) error {
	if q == nil {
		return func(context.Context, string) error {
			return fmt.Errorf("%w: azqueuepub: %s was given a nil queue client", etagstore.ErrInvalidInput, constructor)
		}
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	enqueue := &azqueue.EnqueueMessageOptions{TimeToLive: ttlSeconds(o.TimeToLive)}
	queue := queueName(q)
	return func(ctx context.Context, body string) error {
		_, err := q.EnqueueMessage(ctx, body, enqueue)
		return mapError(queue, err)
	}
}

// ttlSeconds is d as a message's time to live in seconds (nil: the
// service's default; -1: never expires).
func ttlSeconds(d time.Duration) *int32 {
	var s int32
	switch {
	case d == 0:
		return nil
	case d < 0:
		s = -1
	case d >= math.MaxInt32*time.Second:
		s = math.MaxInt32
	default:
		s = int32((d + time.Second - 1) / time.Second)
	}
	return &s
}

// queueName is q's queue, for errors.
func queueName(q *azqueue.QueueClient) string {
	if u, err := azqueue.ParseURL(q.URL()); err == nil && u.QueueName != "" {
		return u.QueueName
	}
	return q.URL()
}

// message is an event as a message's JSON carries it.
type message[E any] struct {
	ID        string    `json:"id"`
	Partition string    `json:"partition"`
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Value     E         `json:"value"`
}

// Encode is the body of ev's message: its JSON in base64 (see the package
// documentation). A value encoding/json cannot write matches
// etagstore.ErrInvalidInput; a body over MaxMessageSize,
// etagstore.ErrTooLarge.
func Encode[E any](ev etagstore.Event[E]) (string, error) {
	b, err := json.Marshal(message[E]{ID: ev.ID, Partition: ev.Partition, Seq: ev.Seq, Time: ev.Time, Value: ev.Value})
	if err != nil {
		return "", fmt.Errorf("%w: azqueuepub: encode event %d of %q: %v", etagstore.ErrInvalidInput, ev.Seq, ev.Partition, err)
	}
	if n := base64.StdEncoding.EncodedLen(len(b)); n > MaxMessageSize {
		return "", fmt.Errorf("%w: azqueuepub: event %d of %q is %d bytes as a message (%d of JSON), over Azure Queue storage's %d", etagstore.ErrTooLarge, ev.Seq, ev.Partition, n, len(b), MaxMessageSize)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Decode is the event a message's body holds: the base64 of its JSON, as
// New enqueues it, or the JSON itself (a body that starts with "{"). A
// body that is neither, that has no id, or whose value does not decode
// into E, matches etagstore.ErrInvalidInput.
func Decode[E any](body string) (etagstore.Event[E], error) {
	b := bytes.TrimSpace([]byte(body))
	if len(b) == 0 || b[0] != '{' {
		d, err := base64.StdEncoding.DecodeString(string(b))
		if err != nil {
			return etagstore.Event[E]{}, fmt.Errorf("%w: azqueuepub: a message of %d bytes is neither JSON nor base64: %v", etagstore.ErrInvalidInput, len(body), err)
		}
		b = d
	}
	var m message[E]
	if err := json.Unmarshal(b, &m); err != nil {
		return etagstore.Event[E]{}, fmt.Errorf("%w: azqueuepub: decode an event: %v", etagstore.ErrInvalidInput, err)
	}
	if m.ID == "" {
		return etagstore.Event[E]{}, fmt.Errorf("%w: azqueuepub: the message is no event: it has no id", etagstore.ErrInvalidInput)
	}
	return etagstore.Event[E]{ID: m.ID, Partition: m.Partition, Seq: m.Seq, Time: m.Time, Value: m.Value}, nil
}

// mapError is the one place where Queue service errors become etagstore's
// sentinels (see the package documentation). nil stays nil.
func mapError(queue string, err error) error {
	if err == nil {
		return nil
	}
	re := azerr.ResponseError(err)
	if re == nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		// No answer: the message may or may not be in the queue.
		return fmt.Errorf("%w: %w", etagstore.ErrUnavailable, azerr.Plain("azqueuepub", "enqueue", queue, err))
	}
	se := azerr.New("azqueuepub", "enqueue", queue, re, err)
	var sentinel error
	switch code := queueerror.Code(re.ErrorCode); {
	case code == queueerror.QueueNotFound || re.StatusCode == http.StatusNotFound:
		se.Detail = "the queue does not exist"
		sentinel = etagstore.ErrStorageNotFound
	case code == queueerror.QueueBeingDeleted:
		se.Detail = "the queue is being deleted"
		sentinel = etagstore.ErrStorageNotFound
	case code == queueerror.QueueDisabled:
		se.Detail = "the queue is disabled"
		sentinel = etagstore.ErrStorageNotFound
	case code == queueerror.MessageTooLarge || code == queueerror.RequestBodyTooLarge || re.StatusCode == http.StatusRequestEntityTooLarge:
		sentinel = etagstore.ErrTooLarge
	case code == queueerror.ServerBusy && re.StatusCode == http.StatusServiceUnavailable:
		return azerr.ServerBusy(re.StatusCode, re.ErrorCode, se) // ErrNotApplied, an ErrUnavailable
	case re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests:
		sentinel = etagstore.ErrUnavailable
	case re.StatusCode == http.StatusBadRequest:
		sentinel = etagstore.ErrInvalidInput
	}
	return azerr.Wrap(sentinel, se)
}
