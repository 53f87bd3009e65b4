package docstore_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	_ "github.com/etagstore/etagstore/docstore" // registers azuretable://, azureblob:// and etagmem://
)

type Account struct {
	Name             string `docstore:"name"`
	Balance          int
	DocstoreRevision any
}

// An Update with mods and no revision is retried on conflicts, so
// concurrent increments are all counted; a write with a stale revision is
// refused with FailedPrecondition.
func Example_optimisticLocking() {
	ctx := context.Background()
	// etagmem:// keeps documents in memory; azuretable://TABLE?partition=P
	// and azureblob://CONTAINER?prefix=P take Azure credentials from the
	// environment.
	coll, err := docstore.OpenCollection(ctx, "etagmem://accounts?key=name")
	if err != nil {
		log.Fatal(err)
	}
	defer coll.Close()

	alice := &Account{Name: "alice", Balance: 100}
	if err := coll.Create(ctx, alice); err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if err := coll.Update(ctx, &Account{Name: "alice"}, docstore.Mods{"Balance": docstore.Increment(5)}); err != nil {
				log.Fatal(err)
			}
		})
	}
	wg.Wait()

	alice.Balance = 0 // alice still holds the revision of the first version
	err = coll.Replace(ctx, alice)
	fmt.Println("stale replace:", gcerrors.Code(err))

	got := &Account{Name: "alice"}
	if err := coll.Get(ctx, got); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", got.Balance)
	// Output:
	// stale replace: FailedPrecondition
	// balance: 150
}
