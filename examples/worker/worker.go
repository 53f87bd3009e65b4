package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
)

// Message is a queue message: a work item, delivered at least once.
type Message struct {
	Resource string `json:"resource"`
	Stage    string `json:"stage"`
}

// Key names the work item: {resourceId}#{stage}.
func (m Message) Key() string { return m.Resource + "#" + m.Stage }

// Output is the result of a work item. Writing it is the idempotent write
// (layer 1), and its existence is the effect the consumer checks (layer 2).
type Output struct {
	Resource string
	Stage    string
	Result   string
}

// Runs counts how often the expensive step ran for an item (for the demo
// and the test: once per item, twice only after a crash).
type Runs struct{ N int64 }

// Stats are the worker pool's counters.
type Stats struct {
	Received, Duplicates, LockBusy, Processed, Failed atomic.Int64
}

func (s *Stats) String() string {
	return fmt.Sprintf("received %d, acknowledged as duplicates %d, left for later (lock busy) %d, processed %d, failed %d",
		s.Received.Load(), s.Duplicates.Load(), s.LockBusy.Load(), s.Processed.Load(), s.Failed.Load())
}

// Worker drains a queue with the three layers Azure's guidance on blob
// leases as a distributed lock recommends: idempotent write, idempotent
// consumer, and a per-item lease lock.
type Worker struct {
	Queue      *azqueue.QueueClient
	Outputs    *etagstore.Store[Output] // layer 1 and 2
	Runs       *etagstore.Store[Runs]
	Locks      *blobstore.Locker // layer 3
	Visibility time.Duration     // how long a dequeued message stays hidden
	// Expensive is the work itself; it must stop when ctx is done.
	Expensive func(ctx context.Context, m Message) (string, error)
	Stats     *Stats
	// afterExpensive, if set, runs after the expensive step (tests crash here).
	afterExpensive func(m Message)
}

// errLeaveIt means: do not delete the message; it comes back after its
// visibility timeout.
var errLeaveIt = errors.New("left for redelivery")

// Run takes messages until ctx is done or the queue has been empty for idle.
func (w *Worker) Run(ctx context.Context, idle time.Duration) error {
	emptySince := time.Now()
	vis := int32(w.Visibility / time.Second)
	for ctx.Err() == nil {
		resp, err := w.Queue.DequeueMessage(ctx, &azqueue.DequeueMessageOptions{VisibilityTimeout: &vis})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if len(resp.Messages) == 0 {
			if time.Since(emptySince) > idle {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		emptySince = time.Now()
		msg := resp.Messages[0]
		w.Stats.Received.Add(1)
		deadline := time.Now().Add(w.Visibility) // the message reappears then
		err = w.handle(ctx, *msg.MessageText, deadline)
		switch {
		case errors.Is(err, errLeaveIt):
			continue // it comes back after the visibility timeout
		case err != nil:
			w.Stats.Failed.Add(1)
			log.Printf("worker: %v", err)
			continue
		}
		// The work is durably done: now, and only now, delete the message.
		if _, err := w.Queue.DeleteMessage(ctx, *msg.MessageID, *msg.PopReceipt, nil); err != nil {
			log.Printf("worker: delete message: %v (it comes back and is acknowledged as a duplicate)", err)
		}
	}
	return nil
}

// handle processes one delivery; nil means the message may be deleted.
func (w *Worker) handle(ctx context.Context, text string, deadline time.Time) error {
	var m Message
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return fmt.Errorf("bad message %q: %w", text, err)
	}
	// Layer 2, idempotent consumer: if the effect exists, this delivery is
	// a duplicate; acknowledge it cheaply.
	if done, err := w.done(ctx, m); err != nil || done {
		if done {
			w.Stats.Duplicates.Add(1)
		}
		return err
	}
	// Layer 3, the lock: a worker that cannot get it before the message
	// would reappear leaves the message alone.
	lctx, cancel := context.WithDeadline(ctx, deadline.Add(-time.Second))
	lk, err := w.Locks.Lock(lctx, m.Key())
	cancel()
	if errors.Is(err, etagstore.ErrLocked) {
		w.Stats.LockBusy.Add(1)
		return errLeaveIt
	}
	if err != nil {
		return err
	}
	defer lk.Unlock(context.WithoutCancel(ctx))
	work := lk.Context() // cancelled the moment the lease is lost; carries the fencing token
	// Someone may have finished while we waited for the lock.
	if done, err := w.done(work, m); err != nil || done {
		if done {
			w.Stats.Duplicates.Add(1)
		}
		return err
	}
	if _, err := w.Runs.Update(work, m.Key(), func(r *Runs) error { r.N++; return nil }, etagstore.CreateIfMissing()); err != nil {
		return err
	}
	result, err := w.Expensive(work, m)
	if err != nil {
		return err // includes the lock's loss: stop, leave the message
	}
	if w.afterExpensive != nil {
		w.afterExpensive(m)
	}
	// Layer 1, idempotent write: create-only, so a second writer changes
	// nothing; same input, same bytes.
	_, err = w.Outputs.Create(work, m.Key(), Output{Resource: m.Resource, Stage: m.Stage, Result: result})
	if err != nil && !errors.Is(err, etagstore.ErrExists) {
		return err
	}
	if lerr := lk.Err(); lerr != nil {
		return lerr // the lease was lost meanwhile: the message comes back, layer 2 will skip it
	}
	w.Stats.Processed.Add(1)
	return nil
}

func (w *Worker) done(ctx context.Context, m Message) (bool, error) {
	_, err := w.Outputs.Get(ctx, m.Key())
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, etagstore.ErrNotFound):
		return false, nil
	}
	return false, err
}
