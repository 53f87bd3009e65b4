package driver

import "strings"

// supersededTag starts every superseded ETag. No backend makes an ETag
// like it: table ETags are W/"datetime'…'", blob and memstore ETags are
// quoted hex.
const supersededTag = `W/"etagstore-superseded-`

// Superseded returns the ETag of a state that was applied but never
// stored as a version of its own, named by name (letters, digits, '.' and
// '-'; unique per state): an Update that was not the last of its
// group-commit batch, or a write found committed with later writes after
// it. It matches no version of any backend: every condition on it fails
// with ErrConflict, and If-None-Match with it is never satisfied by a
// stored version. It is a weak entity tag, valid in an HTTP ETag header.
func Superseded(name string) ETag {
	return ETag(supersededTag + name + `"`)
}

// IsSuperseded reports whether etag was made by Superseded.
func IsSuperseded(etag ETag) bool {
	return strings.HasPrefix(string(etag), supersededTag)
}

// Superseded reports whether e names a state that was applied but never
// stored as a version of its own (see the function Superseded): no
// condition with it can succeed, so a caller who holds one reads the
// document again (Get) for the current version before its next
// conditional write.
func (e ETag) Superseded() bool { return IsSuperseded(e) }

// errSuperseded refuses a condition on a Superseded ETag, as a stale one.
var errSuperseded = Errorf(ErrConflict, "the ETag names a state later writes superseded")
