package blobstore_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etagstore/etagstore/internal/azuritetest"
)

// contention watches a lock from the outside, for tests of mutual
// exclusion: who holds it, who is waiting for it, and — seen in the blob
// client's pipeline — whether an acquire sent while the current holder held
// it was refused (409). A holder calls hold after it got the lock: it stays
// in its critical section until the lock has visibly excluded someone, so
// that every contended hold overlaps a refused acquisition, instead of
// sleeping for a guess at how long that takes.
type contention struct {
	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	holders    int           // in the critical section
	maxHolders int
	waiting    int  // callers inside Lock
	tenure     int  // acquisitions so far: the current holder's number
	refused    bool // an acquire sent during the current tenure was refused

	excluded, alone int // holds that ended on a refused acquire, with nobody waiting
}

func (c *contention) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d holds ended when another's acquire was refused, %d with nobody waiting", c.excluded, c.alone)
}

func newContention() *contention { return &contention{changed: make(chan struct{})} }

// notify wakes the holders waiting in hold; c.mu is held.
func (c *contention) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitingForLock counts a caller entering (+1) or leaving (-1) Lock.
func (c *contention) waitingForLock(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting += d
	c.notify()
}

// enter records a holder entering its critical section.
func (c *contention) enter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holders++
	c.maxHolders = max(c.maxHolders, c.holders)
	c.tenure++
	c.refused = false
	c.notify()
}

// hold returns once an acquire sent during the caller's tenure was
// refused, another holder is inside too (the overlap the test catches), no
// one else is waiting for the lock, or ctx is done.
func (c *contention) hold(ctx context.Context) {
	for {
		c.mu.Lock()
		done := c.refused || c.holders > 1 || c.waiting == 0
		switch {
		case c.refused:
			c.excluded++
		case c.holders == 1 && c.waiting == 0:
			c.alone++
		}
		changed := c.changed
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// leave records a holder leaving its critical section (before it unlocks).
func (c *contention) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holders--
	c.notify()
}

// Do is the pipeline policy (per try) that sees each lease acquisition.
func (c *contention) Do(req *policy.Request) (*http.Response, error) {
	if a := req.Raw().Header["x-ms-lease-action"]; len(a) != 1 || a[0] != "acquire" {
		return req.Next()
	}
	c.mu.Lock()
	tenure, held := c.tenure, c.holders > 0
	c.mu.Unlock()
	resp, err := req.Next()
	if err == nil && resp.StatusCode == http.StatusConflict && held {
		c.mu.Lock()
		if c.tenure == tenure && c.holders > 0 {
			c.refused = true
			c.notify()
		}
		c.mu.Unlock()
	}
	return resp, err
}

// watchedContainer creates a fresh container and returns a client for it
// whose every try passes c, with opts, and whose requests go to via (a
// fault proxy in front of Azurite's blob endpoint) when via is not empty.
func watchedContainer(t *testing.T, via string, opts azcore.ClientOptions, c policy.Policy) *container.Client {
	t.Helper()
	direct := azuritetest.NewContainer(t)
	name := direct.URL()[strings.LastIndex(direct.URL(), "/")+1:]
	var acct, key, endpoint string
	for _, part := range strings.Split(azuritetest.ConnectionString(t), ";") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "AccountName":
			acct = v
		case "AccountKey":
			key = v
		case "BlobEndpoint":
			endpoint = v
		}
	}
	if via != "" {
		endpoint = strings.TrimRight(via, "/") + "/" + acct
	}
	cred, err := azblob.NewSharedKeyCredential(acct, key)
	if err != nil {
		t.Fatal(err)
	}
	opts.PerRetryPolicies = append(opts.PerRetryPolicies, c)
	cc, err := container.NewClientWithSharedKeyCredential(strings.TrimRight(endpoint, "/")+"/"+name, cred, &container.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return cc
}
