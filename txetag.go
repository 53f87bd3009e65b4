package etagstore

// ETag returns the ETag of the version of key the transaction read (read
// now, the first time), or "" when the key was missing: what a caller
// holding a version from an earlier read (a docstore revision, say) checks
// it against inside the transaction. The check is part of the commit: a
// version that changes before it commits makes fn run again. An invalid
// key matches ErrInvalidKey.
func (tx *Tx[T]) ETag(key string) (ETag, error) {
	b, err := tx.version(key)
	if err != nil || !b.exists {
		return "", err
	}
	return b.ETag, nil
}
