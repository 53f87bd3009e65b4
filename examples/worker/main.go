// Command worker drains an Azure Storage queue with the three layers that
// keep duplicate work from hurting: an idempotent write (the output is
// created only once), an idempotent consumer (a delivery whose output exists
// is acknowledged at once) and a lease lock per work item ({resourceId}#{stage})
// held with heartbeat renewal for the life of the message.
//
//	scripts/with-azurite go run ./examples/worker        # needs Azurite (queues and blobs)
//	go run ./examples/worker -conn "$CONNECTION_STRING"
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
)

func main() {
	conn := flag.String("conn", os.Getenv("ETAGSTORE_AZURITE"), "Azure Storage connection string (queues and blobs)")
	items := flag.Int("items", 12, "work items to enqueue")
	dups := flag.Int("duplicates", 4, "extra deliveries of random items")
	workers := flag.Int("workers", 4, "workers")
	flag.Parse()
	if *conn == "" {
		log.Fatal("no connection string: pass -conn, or run through scripts/with-azurite")
	}
	ctx := context.Background()
	name := fmt.Sprintf("work%d", time.Now().UnixNano()%1e9)
	env, err := setup(ctx, *conn, name)
	if err != nil {
		log.Fatal(err)
	}
	for i := range *items + *dups {
		n := i
		if i >= *items {
			n = rand.IntN(*items) // a duplicate delivery
		}
		if err := env.enqueue(ctx, Message{Resource: fmt.Sprintf("doc-%02d", n), Stage: "render"}); err != nil {
			log.Fatal(err)
		}
	}
	stats := &Stats{}
	var wg sync.WaitGroup
	for range *workers {
		w := env.worker(stats, 10*time.Second)
		wg.Go(func() {
			if err := w.Run(ctx, 2*time.Second); err != nil {
				log.Print(err)
			}
		})
	}
	wg.Wait()
	fmt.Println(stats)
	runs := 0
	for d, err := range env.runs.List(ctx, "") {
		if err != nil {
			log.Fatal(err)
		}
		runs += int(d.Value.N)
	}
	fmt.Printf("%d items, %d deliveries: the expensive step ran %d times\n", *items, *items+*dups, runs)
	props, err := env.queue.GetProperties(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if n := props.ApproximateMessagesCount; n == nil || *n != 0 {
		log.Fatalf("queue %s not drained: about %d messages left", name, deref(n))
	}
	fmt.Printf("queue %s drained\n", name)
}

func deref(n *int32) int32 {
	if n == nil {
		return -1
	}
	return *n
}

// env is the queue and containers of one run.
type env struct {
	queue   *azqueue.QueueClient
	outputs *etagstore.Store[Output]
	runs    *etagstore.Store[Runs]
	locks   *blobstore.Locker
}

func setup(ctx context.Context, conn, name string) (*env, error) {
	qs, err := azqueue.NewServiceClientFromConnectionString(conn, nil)
	if err != nil {
		return nil, err
	}
	q := qs.NewQueueClient(name)
	var re *azcore.ResponseError
	if _, err := q.Create(ctx, nil); err != nil && !(errors.As(err, &re) && re.ErrorCode == "QueueAlreadyExists") {
		return nil, err
	}
	bs, err := azblob.NewClientFromConnectionString(conn, nil)
	if err != nil {
		return nil, err
	}
	c := bs.ServiceClient().NewContainerClient(name)
	if _, err := c.Create(ctx, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return nil, err
	}
	locks, err := blobstore.NewLocker(c, nil)
	if err != nil {
		return nil, err
	}
	return &env{
		queue:   q,
		outputs: blobstore.NewStore[Output](c, &blobstore.Options{Prefix: "outputs/"}, nil),
		runs:    blobstore.NewStore[Runs](c, &blobstore.Options{Prefix: "runs/"}, nil),
		locks:   locks,
	}, nil
}

func (e *env) enqueue(ctx context.Context, m Message) error {
	b, _ := json.Marshal(m)
	_, err := e.queue.EnqueueMessage(ctx, string(b), nil)
	return err
}

func (e *env) worker(stats *Stats, visibility time.Duration) *Worker {
	return &Worker{
		Queue: e.queue, Outputs: e.outputs, Runs: e.runs, Locks: e.locks,
		Visibility: visibility, Stats: stats,
		Expensive: func(ctx context.Context, m Message) (string, error) {
			select { // a stand-in for minutes of rendering
			case <-time.After(200 * time.Millisecond):
				return "rendered " + m.Resource, nil
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		},
	}
}
