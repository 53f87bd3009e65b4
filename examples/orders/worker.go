package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
)

// Handled records an event the worker has handled, under the event's ID.
type Handled struct {
	Order string
}

// Worker takes OrderPlaced events from the queue and emails the customer
// once per order. The queue delivers at least once (the relay may publish
// an event again, and a message comes back when its visibility timeout
// ends), so the worker drops every event whose ID it has handled.
type Worker struct {
	Queue      *azqueue.QueueClient
	Handled    *etagstore.Store[Handled] // the IDs handled: the dedupe state
	Email      func(ctx context.Context, e OrderPlaced) error
	Visibility time.Duration // how long a message taken stays hidden from the others

	// Received counts deliveries, Emailed and Repeats what became of
	// them, Deleted the messages deleted for good.
	Received, Emailed, Repeats, Deleted atomic.Int64
}

// Run takes messages until ctx is done.
func (w *Worker) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		n, err := w.Once(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		case n == 0: // the queue is empty: look again in a while
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
	return nil
}

// Once takes up to 32 messages and handles them: how many it took.
func (w *Worker) Once(ctx context.Context) (int, error) {
	n, vis := int32(32), int32(max(w.Visibility, time.Second)/time.Second)
	resp, err := w.Queue.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: &n, VisibilityTimeout: &vis})
	if err != nil {
		return 0, err
	}
	for _, m := range resp.Messages {
		w.Received.Add(1)
		if err := w.handle(ctx, *m.MessageText); err != nil {
			log.Printf("worker: %v (the message comes back after its visibility timeout)", err)
			continue
		}
		// Handled for good: only now is the message deleted.
		if _, err := w.Queue.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err != nil {
			log.Printf("worker: delete message: %v (it comes back, and is dropped as a repeat)", err)
			continue
		}
		w.Deleted.Add(1)
	}
	return len(resp.Messages), nil
}

// handle emails the customer of the event in body, unless the event's ID
// was handled already: a Create of the ID that fails with ErrExists is a
// repeat. The ID is created before the email goes, so two workers holding
// copies of one event never both send it. An email that fails forgets
// the ID again, and the message's next delivery sends it. (A crash
// between the Create and the email loses that one email; to send it
// twice rather than never, email first and Create after.)
func (w *Worker) handle(ctx context.Context, body string) error {
	ev, err := azqueuepub.Decode[OrderPlaced](body)
	if err != nil {
		return err
	}
	d, err := w.Handled.Create(ctx, ev.ID, Handled{Order: ev.Value.Order})
	switch {
	case errors.Is(err, etagstore.ErrExists):
		w.Repeats.Add(1)
		return nil
	case err != nil:
		return err
	}
	if err := w.Email(ctx, ev.Value); err != nil {
		return errors.Join(fmt.Errorf("email for %s: %w", ev.Value.Order, err), w.Handled.Delete(ctx, ev.ID, d.ETag))
	}
	w.Emailed.Add(1)
	return nil
}
