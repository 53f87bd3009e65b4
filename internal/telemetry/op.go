package telemetry

// Op is an operation of a Store, or of a backend package on a Store, as
// spans, metrics, logs and errors name it. Its name is spelled here only.
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
	OpTransact
	NumOps
)

var opNames = [NumOps]string{"Get", "Create", "Replace", "Upsert", "Update", "Delete", "List", "Save", "Page",
	"Merge", "UpsertMerge", "Batch", "Query", "QueryPage", "GetIf", "Transact"}

// String is the operation's name: the etagstore.operation attribute, the
// span "etagstore."+name, and the Op of an OutcomeUnknownError.
func (op Op) String() string { return opNames[op] }
