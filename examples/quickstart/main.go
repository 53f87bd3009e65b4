// Command quickstart races two writers on one document in memory and shows
// what etagstore does about it: the second writer's If-Match fails with 412,
// Update re-reads and re-applies its change, and no increment is lost.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime"
	"sync"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// Counter is the document both writers change.
type Counter struct {
	Hits int
}

func main() {
	ctx := context.Background()
	backend := memstore.New(nil)
	store := etagstore.New[Counter](backend, nil)
	if _, err := store.Create(ctx, "page:home", Counter{}); err != nil {
		log.Fatal(err)
	}

	// 1. The lost update, caught: two writers read the same version ...
	a, _ := store.Get(ctx, "page:home")
	b, _ := store.Get(ctx, "page:home")
	a.Value.Hits++
	b.Value.Hits++
	if _, err := store.Replace(ctx, a); err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer A saved hits =", a.Value.Hits)
	// ... and the second write, If-Match of a stale ETag, is refused (412).
	_, err := store.Replace(ctx, b)
	var conflict *etagstore.ConflictError[Counter]
	if errors.As(err, &conflict) {
		fmt.Printf("writer B got 412: stored hits = %d, B wanted %d\n", conflict.Theirs.Value.Hits, conflict.Mine.Hits)
	}

	// 2. Update does the re-read and retry for you. Here writer A, another
	// process with a Store of its own, commits while writer B's mutation
	// is still running, so B's write gets 412. (A mutate must never write
	// its own key through its own Store: that Update fails at once.)
	writerA := etagstore.New[Counter](backend, nil)
	attempt := 0
	d, err := store.Update(ctx, "page:home", func(c *Counter) error {
		attempt++
		fmt.Printf("writer B, attempt %d: read hits = %d\n", attempt, c.Hits)
		if attempt == 1 {
			if _, err := writerA.Update(ctx, "page:home", func(c *Counter) error { c.Hits += 10; return nil }); err != nil {
				return err
			}
			fmt.Println("writer A added 10 meanwhile; B's If-Match is now stale")
		}
		c.Hits++
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("writer B saved hits = %d after %d attempts\n", d.Value.Hits, attempt)

	// 3. Many writers at once: 8 goroutines x 250 increments.
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 250 {
				_, err := store.Update(ctx, "page:home", func(c *Counter) error {
					mu.Lock()
					calls++ // mutate runs once per attempt
					mu.Unlock()
					c.Hits++
					runtime.Gosched() // let other writers in, as real work would
					return nil
				})
				if err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
	final, _ := store.Get(ctx, "page:home")
	fmt.Printf("after 2000 concurrent Updates: hits = %d (%d + 2000), mutate ran %d times (%d retries after 412)\n",
		final.Value.Hits, d.Value.Hits, calls, calls-2000)

	// 4. Last writer wins only when asked for: no ETag is an error, ETagAny overwrites.
	_, err = store.Replace(ctx, etagstore.Doc[Counter]{Key: "page:home", Value: Counter{}})
	fmt.Println("Replace without ETag:", err)
	reset, _ := store.Replace(ctx, etagstore.Doc[Counter]{Key: "page:home", Value: Counter{}, ETag: etagstore.ETagAny})
	fmt.Println("Replace with ETagAny: hits =", reset.Value.Hits)
}
