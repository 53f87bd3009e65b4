package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore/internal/azuritetest"
)

// TestMain doubles as the crashing worker's process: started by
// TestDuplicatesAndCrash with WORKER_CRASH_QUEUE set, it takes one message,
// runs the expensive step under the item's lock and dies before writing the
// output or deleting the message: no unlock and no renewal any more, as if
// killed.
func TestMain(m *testing.M) {
	if name := os.Getenv("WORKER_CRASH_QUEUE"); name != "" {
		crashingWorker(name)
	}
	os.Exit(m.Run())
}

func crashingWorker(name string) {
	e, err := setup(context.Background(), os.Getenv(azuritetest.EnvVar), name)
	if err != nil {
		fmt.Println("setup:", err)
		os.Exit(1)
	}
	w := e.worker(&Stats{}, 4*time.Second)
	w.afterExpensive = func(m Message) {
		fmt.Println("crashing on", m.Key())
		os.Exit(3)
	}
	_ = w.Run(context.Background(), 10*time.Second)
	fmt.Println("the crashing worker found no message")
	os.Exit(1)
}

// Duplicate deliveries and a worker killed mid-item: every item is
// processed, none is lost, and the expensive step runs once per item except
// the one whose worker died.
func TestDuplicatesAndCrash(t *testing.T) {
	ctx := t.Context()
	name := azuritetest.Name("work")
	e, err := setup(ctx, azuritetest.ConnectionString(t), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.queue.Delete(context.Background(), nil) })
	const items = 10
	dups := []int{1, 3, 3, 7, 9} // duplicate deliveries
	for i := range items {
		if err := e.enqueue(ctx, Message{Resource: fmt.Sprintf("doc-%02d", i), Stage: "render"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range dups {
		if err := e.enqueue(ctx, Message{Resource: fmt.Sprintf("doc-%02d", i), Stage: "render"}); err != nil {
			t.Fatal(err)
		}
	}

	// The crashing worker, in its own process, takes the first message.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WORKER_CRASH_QUEUE="+name)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("the crashing worker did not crash as planned: %v\n%s", err, out)
	}
	t.Logf("child: %s", lastLine(out))

	// Three healthy workers drain the queue; the crashed item comes back
	// when its message's visibility ends and is taken once its lease has
	// expired (15 s without renewal). They are done when every message
	// enqueued has been deleted (acknowledged): their queue client counts
	// the deletions the service confirmed.
	acks := newAcks(items + len(dups))
	q := watchedQueue(t, name, acks)
	stats := &Stats{}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	done := make(chan struct{})
	for range 3 {
		w := e.worker(stats, 4*time.Second)
		w.Queue = q
		go func() {
			_ = w.Run(wctx, time.Hour)
			done <- struct{}{}
		}()
	}
	select {
	case <-acks.all:
	case <-wctx.Done():
		t.Fatalf("after 90 s: %d of %d messages acknowledged; %s", acks.count(), items+len(dups), stats)
	}
	cancel()
	for range 3 {
		<-done
	}
	if !queueEmpty(t, e.queue) {
		t.Error("every message was acknowledged, yet the queue is not empty")
	}

	runs := map[string]int64{}
	for d, err := range e.runs.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		runs[d.Key] = d.Value.N
	}
	twice := 0
	for i := range items {
		key := fmt.Sprintf("doc-%02d#render", i)
		if _, err := e.outputs.Get(ctx, key); err != nil {
			t.Errorf("%s has no output: %v", key, err)
		}
		switch runs[key] {
		case 1:
		case 2:
			twice++
		default:
			t.Errorf("%s: the expensive step ran %d times", key, runs[key])
		}
	}
	if twice != 1 {
		t.Errorf("%d items ran twice, want exactly the crashed one", twice)
	}
	t.Logf("%s; expensive step runs per item: %v", stats, runs)
}

// acks counts the messages deleted, and closes all when want have been.
type acks struct {
	mu   sync.Mutex
	n    int
	want int
	all  chan struct{}
}

func newAcks(want int) *acks { return &acks{want: want, all: make(chan struct{})} }

func (a *acks) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// Do is a pipeline policy: a DELETE of a message answered 204 is one
// acknowledged message (a stale pop receipt gets 404; no message is
// deleted twice).
func (a *acks) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if err == nil && req.Raw().Method == http.MethodDelete && strings.Contains(req.Raw().URL.Path, "/messages/") && resp.StatusCode == http.StatusNoContent {
		a.mu.Lock()
		if a.n++; a.n == a.want {
			close(a.all)
		}
		a.mu.Unlock()
	}
	return resp, err
}

// watchedQueue returns a client for the queue name whose calls pass a.
func watchedQueue(t *testing.T, name string, a *acks) *azqueue.QueueClient {
	t.Helper()
	qs, err := azqueue.NewServiceClientFromConnectionString(azuritetest.ConnectionString(t), &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{PerCallPolicies: []policy.Policy{a}}})
	if err != nil {
		t.Fatal(err)
	}
	return qs.NewQueueClient(name)
}

func queueEmpty(t *testing.T, q *azqueue.QueueClient) bool {
	t.Helper()
	props, err := q.GetProperties(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return props.ApproximateMessagesCount != nil && *props.ApproximateMessagesCount == 0
}

func lastLine(b []byte) string {
	s := string(b)
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
