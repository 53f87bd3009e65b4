package etagstore

import (
	"context"
	"time"
)

// RetryPolicy bounds for how long (and, if asked, how often) a Store's
// writes are tried (every write: Update, Save, Create, Replace, Upsert,
// Delete, Transact, table merges and batches). By default a write is
// bounded by time only: contention is not failure, and while
// MaxElapsedTime and the caller's ctx allow, a write that lost its race is
// tried again. A write is tried again when it lost a race (HTTP
// 412, or a lost create race) and is built again on the new version
// (Update, Save, fenced writes, Merge); when the service refused it
// unapplied (503 ServerBusy); and when its answer was lost and a read
// proves it has not landed. The SDK's own pipeline does not retry writes
// (a blind retry could apply one twice).
//
// The delay before attempt n+1 is drawn uniformly from [0, cap) ("full
// jitter"), where cap grows exponentially from InitialInterval by a factor of
// 2 up to MaxInterval; on a key that keeps losing races it starts higher
// (the engine's contention heat). The write of a key that has waited
// longest in a Store, once it has lost races for longer than four of its
// attempts and 100 ms, takes a cap that shrinks the longer it waits, so
// that of the writers waiting for a hot key, the oldest retry most often
// (one per Store and key: many waiting writers do not flood the service).
// A zero field takes its default. The loop itself is internal/retry's, run by the engine.
//
// Turns. A Store whose writes start from the version it wrote last (group
// commit, the version cache) wins every race on a key that other
// processes also write, since they must read before they write; it cannot
// see them starve. So a run of back-to-back writes of one key from such
// copies ends now and then: its last write is marked, in the document's
// bookkeeping, as the end of the Store's turn, and the Store pauses for
// four of its writes' time before the next. A turn ends once it has
// lasted 5 writes and 100 ms when the Store lost a race on the key lately;
// otherwise once after 128 writes, then after twice as many each time the
// pause drew nobody. The writers waiting elsewhere take the key in the
// pauses: where a write takes 5 ms or more, each waiting Store's
// longest-waiting write of the key reads it back to back until a turn
// ends, and the Store that has waited longest writes first, so that the
// key goes round the processes. Four processes of 4 goroutines on one
// table key at 10 ms keep their commits/s, and p99 falls from 0.7–0.8 s to
// under 0.5 s (docs/performance.md, "Turns").
type RetryPolicy struct {
	// MaxAttempts, if positive, is the number of attempts before giving
	// up (with a *ConflictError after lost races) even though time
	// remains. 1 disables retries. Default: 0, no count: the write is
	// bounded by MaxElapsedTime and ctx.
	MaxAttempts int
	// InitialInterval is the first backoff cap. Default: 4ms.
	InitialInterval time.Duration
	// MaxInterval is the largest backoff cap. Default: 250ms.
	MaxInterval time.Duration
	// MaxElapsedTime stops retrying once this much time has passed since
	// the first attempt. Default: 15s. Negative: no limit but ctx's.
	MaxElapsedTime time.Duration
}

// Clock is the time source of the retry loop. Tests inject a fake one so
// that retries run instantly and deterministically.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, returning ctx.Err() then.
	Sleep(ctx context.Context, d time.Duration) error
}
