// Command wiki is a small wiki on etagstore, the project's main demo: every
// save is a conditional write, concurrent edits of different lines are
// merged, overlapping edits get a conflict page that keeps the editor's
// text, and "overwrite anyway" is the explicit last-writer-wins opt-out.
// Renaming a page writes it under its new name and a redirect under the
// old one in one transaction (Store.Transact; not on blob storage, which
// has none).
//
//	go run ./examples/wiki                         # in memory, http://127.0.0.1:8080
//	go run ./examples/wiki -table "$CONNECTION_STRING"   # Azure Table storage (or Azurite)
//	go run ./examples/wiki -blob "$CONNECTION_STRING"    # Azure Blob storage (or Azurite)
//
// It stops on an interrupt (Ctrl-C), letting requests in flight finish (up
// to 5 s); a second interrupt kills it at once.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (127.0.0.1:0: a free port, logged)")
	table := flag.String("table", "", "Azure Storage connection string: keep pages in the table \"wiki\"")
	blobs := flag.String("blob", "", "Azure Storage connection string: keep pages in the container \"wiki\"")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pages, where, err := openStore(ctx, *table, *blobs)
	if err != nil {
		log.Fatal(err)
	}
	app := NewApp(pages)
	if err := app.Seed(ctx); err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Addr: *addr, Handler: app,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 15 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10,
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		stop() // a second interrupt kills at once
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Printf("shutdown: %v", err)
		}
	}()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("wiki on http://%s (pages in %s)", ln.Addr(), where) // the port chosen for -addr 127.0.0.1:0
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	<-stopped // Serve returns when Shutdown begins; wait for requests in flight
	log.Print("wiki stopped")
}

func openStore(ctx context.Context, table, blobs string) (*etagstore.Store[Page], string, error) {
	switch {
	case table != "":
		svc, err := aztables.NewServiceClientFromConnectionString(table, nil)
		if err != nil {
			return nil, "", err
		}
		if _, err := svc.CreateTable(ctx, "wiki", nil); err != nil && !isExists(err) {
			return nil, "", err
		}
		return tablestore.NewStore[Page](svc.NewClient("wiki"), &tablestore.Options{Partition: "pages"}, nil), "Azure table wiki", nil
	case blobs != "":
		c, err := azblob.NewClientFromConnectionString(blobs, nil)
		if err != nil {
			return nil, "", err
		}
		cc := c.ServiceClient().NewContainerClient("wiki")
		if _, err := cc.Create(ctx, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			return nil, "", err
		}
		return blobstore.NewStore[Page](cc, &blobstore.Options{Prefix: "pages/"}, nil), "Azure blob container wiki", nil
	}
	return etagstore.New[Page](memstore.New(nil), nil), "memory", nil
}

func isExists(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.ErrorCode == string(aztables.TableAlreadyExists)
}
