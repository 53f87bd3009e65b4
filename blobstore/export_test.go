package blobstore

import "time"

// SetLockClock makes l read now as the clock of its fencing tokens.
func SetLockClock(l *Locker, now func() time.Time) { l.now = now }

// NextToken is nextToken: the fencing token following stored.
var NextToken = nextToken
