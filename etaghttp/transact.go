package etaghttp

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/etagstore/etagstore"
)

// The Handler's writes inside the app's own transaction
// (HandlerOptions.Transact): the Handler's part of the commit is a
// function of the transaction, which reads the document, checks the
// request's conditions against the version the transaction read, and puts
// or deletes the document; the app runs it in its transaction
// (etagstore.Transact, or Store.Transact) beside its own writes, through
// the Handler's Store's view. A failed condition is an error of that
// function, which the app's fn returns and the Handler answers. After the
// commit, the view the function put through reports the document and the
// ETag the commit gave it.

// refusal is the error of the Handler's part of a transaction whose
// condition failed: If-Match does not hold the version the transaction
// read (theirs; mine is what the write would have stored, nil for a
// DELETE), or If-None-Match: * found a document (exists).
type refusal[T any] struct {
	im     condition
	theirs etagstore.Doc[T]
	mine   *T
	skip   []string
	exists bool
}

func (e *refusal[T]) Error() string {
	if e.exists {
		return "etaghttp: If-None-Match: * failed: the document exists"
	}
	return "etaghttp: If-Match does not hold the version the transaction read"
}

// txPut is what the Handler's part of a transaction put: the view it
// wrote through and the ETag of the version it read there ("" for a
// create). After the commit the view reports the version the commit made
// (Tx.ETag), which is never the one read: a view that still reports it
// belongs to a run that did not commit.
type txPut[T any] struct {
	tx   *etagstore.Tx[T]
	read etagstore.ETag
}

// txWrite is the Handler's write of key under the request's conditions
// as a function of the app's transaction, through the Handler's Store's
// view of it. change is the PUT's or PATCH's change (nil for a DELETE);
// create, a PUT with If-None-Match: *. It records in *put what it put (nil:
// nothing, in its last call).
func (h *handler[T]) txWrite(r *http.Request, key string, im condition, create bool, change func(T) (T, error), put **txPut[T]) func(tx *etagstore.Tx[T]) error {
	return func(tx *etagstore.Tx[T]) error {
		*put = nil
		cur, err := tx.Get(key)
		if create {
			switch {
			case err == nil:
				return &refusal[T]{exists: true}
			case !errors.Is(err, etagstore.ErrNotFound):
				return err
			}
			var zero T
			v, err := change(zero)
			if err == nil {
				err = h.prepared(r, key, nil, &v)
			}
			if err != nil {
				return err
			}
			if err := tx.Put(key, v); err != nil {
				return err
			}
			*put = &txPut[T]{tx: tx}
			return nil
		}
		if err != nil {
			return err // a missing document fails every If-Match (412)
		}
		etag, err := tx.ETag(key)
		if err != nil {
			return err
		}
		theirs := etagstore.Doc[T]{Key: key, Value: cur, ETag: etag}
		if change == nil {
			if !im.any && !im.matchStrong(etag) {
				return &refusal[T]{im: im, theirs: theirs}
			}
			return tx.Delete(key)
		}
		v, skip, err := h.next(r, key, &cur, change)
		switch {
		case !im.any && !im.matchStrong(etag):
			return &refusal[T]{im: im, theirs: theirs, mine: &v, skip: skip}
		case err != nil:
			return err
		}
		if err := tx.Put(key, v); err != nil {
			return err
		}
		*put = &txPut[T]{tx: tx, read: etag}
		return nil
	}
}

// inTx answers a PUT, PATCH or DELETE of key that runs in the app's
// transaction (HandlerOptions.Transact); see txWrite.
func (h *handler[T]) inTx(w http.ResponseWriter, r *http.Request, key string, im condition, create bool, change func(T) (T, error)) {
	if !im.present && !create {
		preconditionRequired(w, key)
		return
	}
	called := false
	var put *txPut[T]
	write := h.txWrite(r, key, im, create, change, &put)
	err := h.transact(r, key, func(tx *etagstore.Tx[T]) error {
		called = true
		return write(tx)
	})
	var ref *refusal[T]
	switch {
	case h.answerApp(w, r, key, err):
		// The app's own answer (Error), from its fn, Prepare or Transact.
	case errors.As(err, &ref) && ref.exists:
		WriteProblem(w, Problem{Status: http.StatusPreconditionFailed, Key: key,
			Detail: "If-None-Match: * failed: a document with this key already exists. GET it, and send If-Match with its ETag to replace it"})
	case errors.As(err, &ref):
		writeConflict(w, key, ref.im, ref.theirs, ref.mine, ref.skip)
	case err != nil:
		h.failWrite(w, r, key, err)
	case !called:
		h.serverError(w, r, Problem{Status: http.StatusInternalServerError, Key: key, Detail: "storage error"},
			fmt.Errorf("etaghttp: HandlerOptions.Transact returned without calling write for %q", key))
	case change == nil:
		w.WriteHeader(http.StatusNoContent)
	default:
		h.answerTx(w, r, key, put, create)
	}
}

// answerTx answers a PUT or PATCH whose transaction committed: the
// document of key as the transaction left it, with the ETag the commit
// gave it, as put's view reports them after the commit.
func (h *handler[T]) answerTx(w http.ResponseWriter, r *http.Request, key string, put *txPut[T], create bool) {
	if put != nil {
		v, err := put.tx.Get(key)
		etag, eerr := put.tx.ETag(key)
		if err == nil && eerr == nil && etag != "" && etag != put.read {
			status := http.StatusOK
			if create {
				status = http.StatusCreated
			}
			h.written(w, r, key, etagstore.Doc[T]{Key: key, Value: v, ETag: etag}, nil, status)
			return
		}
	}
	h.serverError(w, r, Problem{Status: http.StatusInternalServerError, Key: key, Detail: "storage error"},
		fmt.Errorf("etaghttp: the transaction of HandlerOptions.Transact committed no document %q", key))
}
