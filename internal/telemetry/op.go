package telemetry

// Op is an operation of a Store, of a backend package on a Store, or of
// blobstore's leases and locks, as spans, metrics, logs and errors name
// it. Its name is spelled here only.
type Op uint8

const (
	OpGet Op = iota
	OpCreate
	OpReplace
	OpUpsert
	OpUpdate
	OpDelete
	OpList
	OpSave
	OpPage
	OpMerge       // tablestore.Merge
	OpUpsertMerge // tablestore.UpsertMerge
	OpBatch       // tablestore.Batch.Submit
	OpQuery       // tablestore.Query
	OpQueryPage   // tablestore.QueryPage
	OpGetIf       // blobstore.GetIf
	OpGetBy       // the document holding an index's value
	OpListBy      // the documents holding a lookup index's value
	OpReindex     // entries built for documents written before the index
	OpSweep       // one pass deleting expired documents
	OpTransact
	OpAcquireLease // blobstore's leases
	OpRenewLease
	OpChangeLease
	OpReleaseLease
	OpBreakLease
	OpLock // blobstore's Locker
	OpTryLock
	OpUnlock
	OpLockLost // an event: a held lock was lost
	NumOps
)

var opNames = [NumOps]string{"Get", "Create", "Replace", "Upsert", "Update", "Delete", "List", "Save", "Page",
	"Merge", "UpsertMerge", "Batch", "Query", "QueryPage", "GetIf", "GetBy", "ListBy", "Reindex", "Sweep", "Transact",
	"AcquireLease", "RenewLease", "ChangeLease", "ReleaseLease", "BreakLease", "Lock", "TryLock", "Unlock", "LockLost"}

// String is the operation's name: the etagstore.operation attribute, the
// span "etagstore."+name, and the Op of an OutcomeUnknownError.
func (op Op) String() string { return opNames[op] }

// Writes reports whether op is a write of a Store, whose conflict
// (ErrConflict) refused a write and is counted as one returned.
func (op Op) Writes() bool {
	switch op {
	case OpCreate, OpReplace, OpUpsert, OpUpdate, OpDelete, OpSave, OpMerge, OpUpsertMerge, OpBatch, OpTransact:
		return true
	}
	return false
}

// OfStore reports whether op is a Store's (or a backend package's on a
// Store), whose subject is recorded even when empty (a listing of every
// key, a query of every row).
func (op Op) OfStore() bool { return op <= OpTransact }
