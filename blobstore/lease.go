package blobstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"go.opentelemetry.io/otel/trace"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Infinite is the duration of a lease that lasts until it is released or
// broken.
const Infinite time.Duration = -1

// Lease is a typed handle on an Azure blob or container lease: pessimistic
// locking for write and delete. Failures match etagstore's sentinels:
// another holder is etagstore.ErrLocked (409 LeaseAlreadyPresent); a lease
// this handle held that has expired, been broken or taken over is
// etagstore.ErrLockLost (LeaseIdMismatchWithLeaseOperation, LeaseLost,
// LeaseIsBrokenAndCannotBeRenewed, …); arguments out of range are
// etagstore.ErrInvalidInput, refused before any request.
//
// Each operation is one span (etagstore.AcquireLease, RenewLease,
// ChangeLease, ReleaseLease, BreakLease) with the attributes of a Store's
// spans; a blob lease's key is recorded only with RecordKeys (see Options
// and LockOptions).
//
// A Lease is safe for concurrent use, but its operations are meant to be
// called by one owner.
type Lease struct {
	name string // what it leases, for errors
	key  string // the key it leases, for telemetry; "" for a container
	ops  leaseOps
	rec  *telemetry.Recorder
}

// leaseOps unifies the SDK's blob and container lease clients.
type leaseOps interface {
	acquire(ctx context.Context, seconds int32) error
	renew(ctx context.Context) error
	change(ctx context.Context, id string) error
	release(ctx context.Context) error
	brk(ctx context.Context, period *int32) (time.Duration, error)
	id() string
}

// BlobLease returns a handle on the lease of the blob under key. leaseID
// is the id to acquire with, a UUID ("" picks a fresh random one); pass the
// id of a lease already held to renew, change or release it. A key the
// Backend cannot store matches etagstore.ErrInvalidKey, a leaseID that is
// not a UUID etagstore.ErrInvalidInput; nothing is sent.
func (b *Backend) BlobLease(key, leaseID string) (*Lease, error) {
	if err := b.ValidateKey(key); err != nil {
		return nil, err
	}
	return newBlobLease(b.blob(key), b.opts.Prefix+key, key, leaseID, b.rec)
}

func newBlobLease(client *blockblob.Client, name, key, leaseID string, rec *telemetry.Recorder) (*Lease, error) {
	if leaseID == "" {
		leaseID = NewLeaseID()
	}
	if err := checkLeaseID("lease id", leaseID); err != nil {
		return nil, err
	}
	c, err := lease.NewBlobClient(client, &lease.BlobClientOptions{LeaseID: &leaseID})
	if err != nil {
		return nil, fmt.Errorf("%w: blobstore: lease id: %w", driver.ErrInvalidInput, err)
	}
	return &Lease{name: name, key: key, ops: blobLease{c}, rec: rec}, nil
}

// ContainerLease returns a handle on the lease of the Backend's container.
// While it is held, deleting the container without the lease id fails
// (etagstore.ErrLocked): a lease that guards deletion. leaseID is as for
// BlobLease: a UUID, or "" for a fresh one; any other matches
// etagstore.ErrInvalidInput, and nothing is sent.
func (b *Backend) ContainerLease(leaseID string) (*Lease, error) {
	if leaseID == "" {
		leaseID = NewLeaseID()
	}
	if err := checkLeaseID("lease id", leaseID); err != nil {
		return nil, err
	}
	c, err := lease.NewContainerClient(b.c, &lease.ContainerClientOptions{LeaseID: &leaseID})
	if err != nil {
		return nil, fmt.Errorf("%w: blobstore: lease id: %w", driver.ErrInvalidInput, err)
	}
	return &Lease{name: "container", ops: containerLease{c}, rec: b.rec}, nil
}

// NewLeaseID returns a random lease id (a version 4 UUID).
func NewLeaseID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// checkLeaseID refuses, before anything is sent, a lease id that is not a
// UUID in its 36-character form (8-4-4-4-12 hexadecimal digits, either
// case), the form Azure hands out and NewLeaseID makes: the error matches
// etagstore.ErrInvalidInput. what names the id in the error.
func checkLeaseID(what, id string) error {
	if isUUID(id) {
		return nil
	}
	return fmt.Errorf("%w: blobstore: %s %.60q is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", driver.ErrInvalidInput, what, id)
}

// isUUID reports whether s is a UUID in its 36-character form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// ID returns the lease id this handle uses.
func (l *Lease) ID() string { return l.ops.id() }

// Acquire takes the lease for d: whole seconds from 15 to 60, or Infinite.
// Another holder's lease matches etagstore.ErrLocked. Acquiring again with
// the id already held renews it.
func (l *Lease) Acquire(ctx context.Context, d time.Duration) error {
	return l.observe(ctx, telemetry.OpAcquireLease, func(ctx context.Context) error {
		seconds, err := leaseSeconds(d)
		if err != nil {
			return err
		}
		return l.wrap(ctx, "acquire", l.ops.acquire(ctx, seconds))
	})
}

// observe runs op as one span; opts add to the span's start options.
func (l *Lease) observe(ctx context.Context, op telemetry.Op, run func(ctx context.Context) error, opts ...trace.SpanStartOption) error {
	ctx, sp := l.rec.Begin(ctx, op, l.key, opts...)
	err := run(ctx)
	sp.End(err)
	return err
}

func leaseSeconds(d time.Duration) (int32, error) {
	if d == Infinite {
		return -1, nil
	}
	if d < 15*time.Second || d > 60*time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("%w: a lease lasts 15 to 60 whole seconds or Infinite, not %v", driver.ErrInvalidInput, d)
	}
	return int32(d / time.Second), nil
}

// Renew restarts the lease's period. A lease that expired and was taken,
// or was broken, matches etagstore.ErrLockLost.
func (l *Lease) Renew(ctx context.Context) error { return l.renew(ctx) }

// renew is Renew; opts add to its span's start options.
func (l *Lease) renew(ctx context.Context, opts ...trace.SpanStartOption) error {
	return l.observe(ctx, telemetry.OpRenewLease, func(ctx context.Context) error {
		return l.wrap(ctx, "renew", l.ops.renew(ctx))
	}, opts...)
}

// Change replaces the lease id with newID (a UUID) while keeping the lease.
// A newID that is not a UUID matches etagstore.ErrInvalidInput, and nothing
// is sent; a lease that is no longer this handle's matches
// etagstore.ErrLockLost.
func (l *Lease) Change(ctx context.Context, newID string) error {
	return l.observe(ctx, telemetry.OpChangeLease, func(ctx context.Context) error {
		if err := checkLeaseID("new lease id", newID); err != nil {
			return err
		}
		return l.wrap(ctx, "change", l.ops.change(ctx, newID))
	})
}

// Release ends the lease so that another can acquire it at once. Releasing
// a lease that is no longer this handle's matches etagstore.ErrLockLost.
func (l *Lease) Release(ctx context.Context) error {
	return l.observe(ctx, telemetry.OpReleaseLease, func(ctx context.Context) error {
		return l.wrap(ctx, "release", l.ops.release(ctx))
	})
}

// Break ends whoever's lease is held, after period (0 to 60 whole seconds;
// negative: the rest of the lease's own period) and returns the time left
// until it is broken. It needs no lease id.
func (l *Lease) Break(ctx context.Context, period time.Duration) (time.Duration, error) {
	var left time.Duration
	err := l.observe(ctx, telemetry.OpBreakLease, func(ctx context.Context) error {
		var p *int32
		if period >= 0 {
			if period > 60*time.Second || period%time.Second != 0 {
				return fmt.Errorf("%w: a break period is 0 to 60 whole seconds, not %v", driver.ErrInvalidInput, period)
			}
			p = to(int32(period / time.Second))
		}
		var err error
		left, err = l.ops.brk(ctx, p)
		return l.wrap(ctx, "break", err)
	})
	return left, err
}

// wrap is the error of the lease request op that ended with err, counted
// as one request sent.
func (l *Lease) wrap(ctx context.Context, op string, err error) error {
	return driver.Sent(ctx, mapError(op+" lease", driver.CondNone, l.name, err))
}

type blobLease struct{ c *lease.BlobClient }

func (b blobLease) acquire(ctx context.Context, s int32) error {
	_, err := b.c.AcquireLease(ctx, s, nil)
	return err
}
func (b blobLease) renew(ctx context.Context) error { _, err := b.c.RenewLease(ctx, nil); return err }
func (b blobLease) change(ctx context.Context, id string) error {
	_, err := b.c.ChangeLease(ctx, id, nil)
	return err
}
func (b blobLease) release(ctx context.Context) error {
	_, err := b.c.ReleaseLease(ctx, nil)
	return err
}
func (b blobLease) brk(ctx context.Context, p *int32) (time.Duration, error) {
	resp, err := b.c.BreakLease(ctx, &lease.BlobBreakOptions{BreakPeriod: p})
	return seconds(resp.LeaseTime), err
}
func (b blobLease) id() string { return *b.c.LeaseID() }

type containerLease struct{ c *lease.ContainerClient }

func (c containerLease) acquire(ctx context.Context, s int32) error {
	_, err := c.c.AcquireLease(ctx, s, nil)
	return err
}
func (c containerLease) renew(ctx context.Context) error {
	_, err := c.c.RenewLease(ctx, nil)
	return err
}
func (c containerLease) change(ctx context.Context, id string) error {
	_, err := c.c.ChangeLease(ctx, id, nil)
	return err
}
func (c containerLease) release(ctx context.Context) error {
	_, err := c.c.ReleaseLease(ctx, nil)
	return err
}
func (c containerLease) brk(ctx context.Context, p *int32) (time.Duration, error) {
	resp, err := c.c.BreakLease(ctx, &lease.ContainerBreakOptions{BreakPeriod: p})
	return seconds(resp.LeaseTime), err
}
func (c containerLease) id() string { return *c.c.LeaseID() }

func seconds(p *int32) time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(*p) * time.Second
}
