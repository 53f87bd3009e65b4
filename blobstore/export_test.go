package blobstore

import "time"

// SetLockClock makes l read now as the clock of its fencing tokens.
func SetLockClock(l *Locker, now func() time.Time) { l.now = now }

// NextToken is nextToken: the fencing token following stored.
var NextToken = nextToken

// SetQueueHook makes l call f whenever a caller of Lock gets in line for
// key, as the n-th waiting; f must not call l.
func SetQueueHook(l *Locker, f func(key string, n int)) { l.queued = f }

// LockerOptions returns l's options with their defaults applied.
func LockerOptions(l *Locker) LockOptions { return l.opts }
