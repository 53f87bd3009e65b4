package blobstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"go.opentelemetry.io/otel/trace"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azerr"
	"github.com/etagstore/etagstore/internal/azretry"
)

// freeKey is the lock blob's metadata entry holding when the process that
// holds the lease releases it for other processes (the end of its tenure),
// in milliseconds since the Unix epoch on that process's clock. Waiters in
// other processes read it to try again just then; it steers no safety.
const freeKey = "fencefreeat"

// session is one lease a Locker holds on a lock blob, handed from each
// holder to the next waiter in line until it ends; renewals run in the
// background as long as it lasts.
type session struct {
	l       *Locker
	key     string
	name    string // the lock blob's
	bc      *blockblob.Client
	lease   *Lease
	started time.Time               // when the lease was acquired
	tenure  time.Duration           // how long it is handed over before it is released
	origin  []trace.SpanStartOption // links the renewals to the acquiring span

	// The token last written on the lock blob, the blob's ETag after that
	// write, and the Date of the service's answer. Only the caller with
	// the turn touches them.
	token int64
	etag  azcore.ETag
	date  *time.Time
	ended bool

	stop chan struct{} // closed by end
	done chan struct{} // closed when renewLoop returns

	mu     sync.Mutex
	holder *Lock // nil between holders
	err    error // why the lease was lost
}

func (l *Locker) newSession(ctx context.Context, q *keyQueue, name string, bc *blockblob.Client, ls *Lease) *session {
	s := &session{l: l, key: q.key, name: name, bc: bc, lease: ls, started: time.Now(), tenure: q.tenureOf(l.opts),
		stop: make(chan struct{}), done: make(chan struct{})}
	s.origin = linkTo(ctx)
	return s
}

// linkTo returns the start option linking a span to ctx's span, if any.
func linkTo(ctx context.Context) []trace.SpanStartOption {
	if origin := trace.SpanContextFromContext(ctx); origin.IsValid() {
		return []trace.SpanStartOption{trace.WithLinks(trace.Link{SpanContext: origin})}
	}
	return nil
}

// lac is the condition of holding the session's lease.
func (s *session) lac() *blob.LeaseAccessConditions {
	return &blob.LeaseAccessConditions{LeaseID: to(s.lease.ID())}
}

// firstToken reads the token stored on the lock blob under the lease just
// acquired, then writes the next one (see bump).
func (s *session) firstToken(ctx context.Context) error {
	props, err := s.bc.GetProperties(ctx, &blob.GetPropertiesOptions{AccessConditions: &blob.AccessConditions{LeaseAccessConditions: s.lac()}})
	if err := driver.Sent(ctx, mapError("read lock token", driver.CondNone, s.name, err)); err != nil {
		return err
	}
	s.token, s.etag, s.date = storedToken(props.Metadata), *props.ETag, props.Date
	return s.bump(ctx)
}

// bump writes the token following the stored one (see nextToken) on the
// lock blob, in one request under the lease and If-Match the ETag of the
// last write: it lands only while the lease is the session's and nobody
// else changed the token. The clock is read as the bump starts, and kept
// within the Date of the last answer. It also writes when the lease will
// be released for others (freeKey).
func (s *session) bump(ctx context.Context) error {
	token := nextToken(s.token, s.l.now(), s.date)
	value := strconv.FormatInt(token, 10)
	free := strconv.FormatInt(s.started.Add(s.tenure).UnixMilli(), 10)
	resp, err := s.bc.SetMetadata(azretry.NoRetry(ctx), map[string]*string{tokenKey: &value, freeKey: &free}, &blob.SetMetadataOptions{
		AccessConditions: &blob.AccessConditions{
			LeaseAccessConditions:    s.lac(),
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: to(s.etag)},
		},
	})
	etag, date := resp.ETag, resp.Date
	err = driver.Sent(ctx, mapError("write lock token", driver.CondIfMatch, s.name, err))
	var re *azcore.ResponseError
	if err != nil && !errors.As(err, &re) {
		// The answer was lost. Only the lease holder can change the
		// metadata, so reading it back tells whether the write landed.
		props, rerr := s.bc.GetProperties(ctx, &blob.GetPropertiesOptions{AccessConditions: &blob.AccessConditions{LeaseAccessConditions: s.lac()}})
		if driver.Sent(ctx, mapError("read lock token", driver.CondNone, s.name, rerr)) == nil && storedToken(props.Metadata) == token {
			err, etag, date = nil, props.ETag, props.Date
		}
	}
	if err != nil {
		return err
	}
	s.token, s.date = token, date
	if etag != nil {
		s.etag = *etag
	}
	return nil
}

// freeAt reads when the process holding key's lease releases it for
// others (see freeKey); false if the lock blob does not say.
func (l *Locker) freeAt(ctx context.Context, key string) (time.Time, bool) {
	props, err := l.c.NewBlockBlobClient(l.opts.Prefix+key).GetProperties(ctx, nil)
	if driver.Sent(ctx, mapError("read lock", driver.CondNone, key, err)) != nil {
		return time.Time{}, false
	}
	for k, v := range props.Metadata {
		if strings.EqualFold(k, freeKey) && v != nil {
			if ms, err := strconv.ParseInt(*v, 10, 64); err == nil {
				return time.UnixMilli(ms), true
			}
		}
	}
	return time.Time{}, false
}

// hold makes the Lock of the caller that has the turn with token just
// written; origin links its loss to the span that took it.
func (s *session) hold(base context.Context, q *keyQueue, origin []trace.SpanStartOption) *Lock {
	lk := &Lock{key: s.key, sess: s, q: q, token: s.token, events: &s.l.events, origin: origin,
		lost: make(chan struct{}), passed: make(chan struct{})}
	lk.ctx, lk.cancel = context.WithCancelCause(etagstore.WithFence(context.WithoutCancel(base), s.token))
	s.mu.Lock()
	s.holder = lk
	err := s.err
	s.mu.Unlock()
	s.l.events.counter.Add(context.Background(), 1, s.l.events.acquired...)
	if err != nil { // lost since the token was written
		lk.lose(err)
	}
	return lk
}

// detach ends lk's hold of the session.
func (s *session) detach(lk *Lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder == lk {
		s.holder = nil
	}
}

// lost returns why the lease was lost, nil while it is held.
func (s *session) lost() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// lose marks the lease lost, and the Lock holding it.
func (s *session) lose(err error) {
	s.mu.Lock()
	s.err = err
	h := s.holder
	s.mu.Unlock()
	if h != nil {
		h.lose(err)
	}
}

// end stops the renewals and releases the lease unless it was lost. Only
// the caller with the turn calls it, once. A lease found lost by the
// release (see release) is an error matching etagstore.ErrLockLost.
func (s *session) end(ctx context.Context) error {
	if s.ended {
		return nil
	}
	s.ended = true
	close(s.stop)
	<-s.done
	if s.lost() != nil {
		return nil
	}
	return s.release(ctx)
}

// release releases the lease. The service's answer that the lease is not
// ours (409 LeaseIdMismatchWithLeaseOperation and the other lease codes:
// another lease holds the lock blob, or none does) or that the lock blob
// is gone (404) means the lease was lost while held, which the renewals
// had not seen yet: the error matches etagstore.ErrLockLost.
//
// The first try is sent alone (no SDK retry), so that its 409 can only
// answer this release. If it got no answer, or a 5xx, the release is sent
// again with the SDK's retries. When the first try may have landed (no
// answer, or a 5xx but a 503 ServerBusy), a 409 then may answer its
// success, so it is taken as released: only a 404 says the lock was lost.
func (s *session) release(ctx context.Context) error {
	err := s.lease.Release(azretry.NoRetry(ctx))
	if err == nil {
		return nil
	}
	if re := azerr.ResponseError(err); (re == nil || re.StatusCode >= 500) && ctx.Err() == nil {
		mayHaveLanded := !errors.Is(err, driver.ErrNotApplied) // a 503 ServerBusy was refused unapplied
		if err = s.lease.Release(ctx); err == nil || mayHaveLanded && errors.Is(err, etagstore.ErrLockLost) {
			return nil
		}
	}
	switch {
	case errors.Is(err, etagstore.ErrNotFound):
		return lockLost(s.key, "the lock blob was deleted while held", err)
	case errors.Is(err, etagstore.ErrLockLost):
		return lockLost(s.key, "the release found the lease broken, expired or another's", err)
	}
	return err
}

// lockLost is the error of the lock on key found lost: it matches
// etagstore.ErrLockLost and no other sentinel. why says how it was found;
// cause is the failure that showed it, whose service answer (if any)
// stays one errors.As away.
func lockLost(key, why string, cause error) error {
	if se := (*azerr.ServiceError)(nil); errors.As(cause, &se) {
		// The answer without the sentinel it was mapped to (a 404's
		// ErrNotFound, a 503's ErrUnavailable, ErrLockLost again): one
		// sentinel per failure, one "etagstore:" per text.
		cause = se
	} else if driver.SentinelOf(cause) != nil {
		return fmt.Errorf("%w: lock %q: %s: %s", etagstore.ErrLockLost, key, why, strings.TrimPrefix(cause.Error(), "etagstore: "))
	}
	return fmt.Errorf("%w: lock %q: %s: %w", etagstore.ErrLockLost, key, why, cause)
}

// renewLoop renews the lease every RenewInterval. A transient failure is
// retried sooner; a definitive one (the lease is someone else's, broken, or
// gone) or failures lasting until the lease may have expired mark the
// lease lost.
func (s *session) renewLoop(lastOK time.Time) {
	defer close(s.done)
	o := &s.l.opts
	// The lease may expire LeaseDuration after the last renewal the server
	// saw, which is before lastOK; give up half a renewal interval early.
	deadline := func() time.Time { return lastOK.Add(o.LeaseDuration - o.RenewInterval/2) }
	retry := max(o.RenewInterval/5, 50*time.Millisecond)
	t := time.NewTimer(o.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline())
		started := time.Now()
		err := s.lease.renew(ctx, s.origin...)
		cancel()
		switch {
		case err == nil:
			lastOK = started
			s.l.events.counter.Add(context.Background(), 1, s.l.events.renewed...)
			t.Reset(o.RenewInterval)
		case errors.Is(err, etagstore.ErrLockLost), errors.Is(err, etagstore.ErrLocked), errors.Is(err, etagstore.ErrNotFound):
			s.lose(lockLost(s.key, "the renewal was refused", err))
			return
		case !time.Now().Add(retry).Before(deadline()):
			s.lose(lockLost(s.key, "renewals failing since "+lastOK.Format(time.RFC3339Nano)+", the lease may have expired", err))
			return
		default:
			t.Reset(retry)
		}
	}
}
