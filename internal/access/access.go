// Package access is how the backend packages (tablestore's merges,
// batches and queries, blobstore's conditional reads) reach a Store's one
// delivery engine and its telemetry without widening package etagstore's
// API: package etagstore registers the functions here when it is
// initialised, and the backend packages call them with the *Store[T] they
// were given, as an any.
package access
