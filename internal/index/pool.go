package index

import "sync"

// pool runs work on goroutines of their own, at most so many at once:
// a sweep pass's deletes (sweepPool), a Reindex page's batches
// (commitBatches). The first that fails stops it: those running finish,
// and no more start.
type pool struct {
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex // over err
	err   error
}

func newPool(n int) *pool { return &pool{slots: make(chan struct{}, n)} }

// do runs work once a slot is free (not at all once the pool failed).
func (p *pool) do(work func() error) {
	p.slots <- struct{}{}
	if p.failed() {
		<-p.slots
		return
	}
	p.wg.Go(func() {
		defer func() { <-p.slots }()
		if err := work(); err != nil {
			p.fail(err)
		}
	})
}

// fail stops the pool with err, unless it failed already.
func (p *pool) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

func (p *pool) failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil
}

// wait waits for the work running and returns the first failure.
func (p *pool) wait() error {
	p.wg.Wait()
	return p.err
}
