package docstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gocloud.dev/docstore/driver"

	"github.com/etagstore/etagstore"
)

// RunActions runs the actions: gets that must come first, then the other
// gets and the writes concurrently (each key at most once), then the atomic
// writes as one Store.Transact, then the gets that must come after.
func (c *collection) RunActions(ctx context.Context, actions []*driver.Action, opts *driver.RunActionsOptions) driver.ActionListError {
	errs := make([]error, len(actions))
	if opts.BeforeDo != nil {
		if err := opts.BeforeDo(func(any) bool { return false }); err != nil {
			for i := range errs {
				errs[i] = err
			}
			return driver.NewActionListError(errs)
		}
	}
	run := func(as []*driver.Action) {
		t := driver.NewThrottle(c.opts.MaxOutstandingActions)
		for _, a := range as {
			t.Acquire()
			go func() {
				defer t.Release()
				errs[a.Index] = c.runAction(ctx, a)
			}()
		}
		t.Wait()
	}
	beforeGets, gets, writes, writesTx, afterGets := driver.GroupActions(actions)
	run(beforeGets)
	run(append(gets, writes...))
	if len(writesTx) > 0 {
		err := c.runAtomic(ctx, writesTx)
		for _, a := range writesTx {
			errs[a.Index] = err
		}
	}
	run(afterGets)
	return driver.NewActionListError(errs)
}

// runAction runs one action through the Store.
func (c *collection) runAction(ctx context.Context, a *driver.Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key, rev, err := c.target(a)
	if err != nil {
		return err
	}
	switch a.Kind {
	case driver.Get:
		return c.get(ctx, a, key)
	case driver.Delete:
		return c.delete(ctx, key, rev)
	case driver.Update:
		return c.update(ctx, a, key, rev)
	}
	return c.write(ctx, a, key, rev)
}

// makeKey gives a Create without a key a unique one.
func (c *collection) makeKey(a *driver.Action) error {
	if c.keyField == "" {
		return invalidf("missing document key, and a key function cannot be given one")
	}
	key := driver.UniqueString()
	if err := a.Doc.SetField(c.keyField, key); err != nil {
		return invalidf("cannot set key field %q: %v", c.keyField, err)
	}
	a.Key = key
	return nil
}

// revision is the document's revision: "" when it has none. A revision
// that is not a non-empty string matches etagstore.ErrInvalidInput.
func (c *collection) revision(doc driver.Document) (etagstore.ETag, error) {
	v, err := doc.GetField(c.opts.RevisionField)
	if err != nil || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return "", invalidf("revision field %s holds %v (%T), not an ETag", c.opts.RevisionField, v, v)
	}
	return etagstore.ETag(s), nil
}

// setRevision records etag in doc's revision field, when doc has one or
// stored was written with one.
func (c *collection) setRevision(doc driver.Document, etag etagstore.ETag, stored bool) error {
	if !stored && !doc.HasField(c.opts.RevisionField) {
		return nil
	}
	if etag == "" {
		return nil // no version known (a Store returns an ETag with every Doc it writes)
	}
	if err := doc.SetField(c.opts.RevisionField, string(etag)); err != nil {
		return invalidf("cannot set revision field %s: %v", c.opts.RevisionField, err)
	}
	return nil
}

// encode is the stored form of doc: its members, the revision field
// left out of a struct's (see marshal).
func (c *collection) encode(doc driver.Document) (raw, error) {
	m, err := encodeDoc(doc)
	if err != nil {
		return nil, err
	}
	if _, isMap := doc.Origin.(map[string]any); !isMap {
		// A struct with the revision field gets its revision on every
		// read: nothing need be stored for it.
		delete(m, c.opts.RevisionField)
	}
	return c.marshal(m)
}

// marshal is m stored. The revision is the ETag: a map written with the
// revision field keeps it as an empty marker, so that a read into a map
// gives it the revision (and one written without, none).
func (c *collection) marshal(m map[string]any) (raw, error) {
	if _, ok := m[c.opts.RevisionField]; ok {
		m[c.opts.RevisionField] = ""
	}
	data, err := c.format.marshal(m)
	return raw(data), err
}

// decode fills doc from a stored document (only the field paths fps, when
// given) and sets its revision.
func (c *collection) decode(doc driver.Document, data raw, etag etagstore.ETag, fps [][]string) error {
	m, err := c.format.unmarshal(data)
	if err != nil {
		return err
	}
	return c.decodeMap(doc, m, etag, fps)
}

// decodeMap is decode of a stored document already parsed.
func (c *collection) decodeMap(doc driver.Document, m map[string]any, etag etagstore.ETag, fps [][]string) error {
	_, hasRev := m[c.opts.RevisionField]
	delete(m, c.opts.RevisionField)
	if len(fps) > 0 {
		m = project(m, fps)
		hasRev = hasRev && slices.ContainsFunc(fps, func(fp []string) bool { return len(fp) == 1 && fp[0] == c.opts.RevisionField })
	}
	if err := doc.Decode(decoder{m}); err != nil {
		return invalidf("decode: %v", err)
	}
	return c.setRevision(doc, etag, hasRev)
}

// project is m with only the field paths fps.
func project(m map[string]any, fps [][]string) map[string]any {
	out := map[string]any{}
	for _, fp := range fps {
		v, ok := getAt(m, fp)
		if !ok {
			continue
		}
		parent := out
		for _, k := range fp[:len(fp)-1] {
			next, ok := parent[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				parent[k] = next
			}
			parent = next
		}
		parent[fp[len(fp)-1]] = v
	}
	return out
}

// getAt is the value of m at field path fp.
func getAt(m map[string]any, fp []string) (any, bool) {
	var v any = m
	for _, k := range fp {
		if s, ok := v.(rawString); ok {
			// A path into a member a tablestore.Store[T] holds as a
			// string of JSON (a nested struct, a map): its shape says
			// it is an object.
			v, _ = parseJSON([]byte(s))
		}
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func (c *collection) get(ctx context.Context, a *driver.Action, key string) error {
	d, err := c.store.Get(ctx, key)
	if err != nil {
		return err
	}
	return c.decode(a.Doc, d.Value, d.ETag, a.FieldPaths)
}

// write runs a Create, Replace or Put.
func (c *collection) write(ctx context.Context, a *driver.Action, key string, rev etagstore.ETag) error {
	data, err := c.encode(a.Doc)
	if err != nil {
		return err
	}
	var d etagstore.Doc[raw]
	switch {
	case a.Kind == driver.Create:
		if rev != "" {
			return invalidf("Create of a document with a revision")
		}
		d, err = c.store.Create(ctx, key, data)
	case a.Kind == driver.Put && rev == "":
		d, err = c.store.Upsert(ctx, key, data)
	default: // Replace, or Put with a revision
		if rev == "" {
			rev = etagstore.ETagAny // must exist
		}
		d, err = c.store.Replace(ctx, etagstore.Doc[raw]{Key: key, Value: data, ETag: rev})
	}
	if err != nil {
		return err
	}
	return c.setRevision(a.Doc, d.ETag, false)
}

// delete deletes key: with If-Match of rev, or of any version when there
// is none (then a missing document is no error).
func (c *collection) delete(ctx context.Context, key string, rev etagstore.ETag) error {
	if rev != "" {
		return c.store.Delete(ctx, key, rev)
	}
	err := c.store.Delete(ctx, key, etagstore.ETagAny)
	if errors.Is(err, etagstore.ErrNotFound) {
		return nil
	}
	return err
}

// update applies a.Mods: without a revision by Store.Update (retried on
// conflicts, exactly once), with one by a read, a check of the revision and
// a Replace with If-Match.
func (c *collection) update(ctx context.Context, a *driver.Action, key string, rev etagstore.ETag) error {
	mods := a.Mods
	if rev == "" {
		d, err := c.store.Update(ctx, key, func(v *raw) error { return c.applyMods(v, mods) })
		if err != nil {
			return err
		}
		return c.setRevision(a.Doc, d.ETag, false)
	}
	d, err := c.store.Get(ctx, key)
	if err != nil {
		return err
	}
	if d.ETag != rev {
		return fmt.Errorf("%w: docstore: %q is at another revision", etagstore.ErrConflict, key)
	}
	if err := c.applyMods(&d.Value, mods); err != nil {
		return err
	}
	d, err = c.store.Replace(ctx, d)
	if err != nil {
		return err
	}
	return c.setRevision(a.Doc, d.ETag, false)
}

// applyMods applies mods to the stored document v: all of them or, on an
// error, none.
func (c *collection) applyMods(v *raw, mods []driver.Mod) error {
	m, err := c.format.unmarshal(*v)
	if err != nil {
		return err
	}
	for _, mod := range mods {
		if err := applyMod(m, mod); err != nil {
			return err
		}
	}
	data, err := c.marshal(m)
	if err != nil {
		return err
	}
	*v = data
	return nil
}

func applyMod(m map[string]any, mod driver.Mod) error {
	fp := mod.FieldPath
	parent, err := parentMap(m, fp, mod.Value != nil)
	if err != nil || parent == nil {
		return err // a delete under a missing member deletes nothing
	}
	last := fp[len(fp)-1]
	switch v := mod.Value.(type) {
	case nil:
		delete(parent, last)
	case driver.IncOp:
		amount, err := encodeValue(v.Amount)
		if err != nil {
			return err
		}
		sum, err := add(parent[last], amount)
		if err != nil {
			return invalidf("increment %s: %v", strings.Join(fp, "."), err)
		}
		parent[last] = sum
	default:
		val, err := encodeValue(v)
		if err != nil {
			return err
		}
		parent[last] = val
	}
	return nil
}

// parentMap is the map holding fp's last member, made on the way when
// create is set (nil when missing otherwise).
func parentMap(m map[string]any, fp []string, create bool) (map[string]any, error) {
	for _, k := range fp[:len(fp)-1] {
		next, ok := m[k]
		if !ok || next == nil {
			if !create {
				return nil, nil
			}
			next = map[string]any{}
			m[k] = next
		}
		if m, ok = next.(map[string]any); !ok {
			return nil, invalidf("field path %s: %s is not a map", strings.Join(fp, "."), k)
		}
	}
	return m, nil
}

// add is x+y for stored numbers (int64 or float64); a missing x is 0.
func add(x, y any) (any, error) {
	switch y.(type) {
	case int64, float64:
	default:
		return nil, fmt.Errorf("amount %v is not a number", y)
	}
	switch x := x.(type) {
	case nil:
		return y, nil
	case int64:
		if yi, ok := y.(int64); ok {
			return x + yi, nil
		}
		return float64(x) + y.(float64), nil
	case float64:
		if yi, ok := y.(int64); ok {
			return x + float64(yi), nil
		}
		return x + y.(float64), nil
	}
	return nil, fmt.Errorf("value %v is not a number", x)
}

// target is the key a's document is stored under (made first for a Create
// without one) and the revision it holds ("" for none).
func (c *collection) target(a *driver.Action) (string, etagstore.ETag, error) {
	if a.Kind == driver.Create && a.Key == nil {
		if err := c.makeKey(a); err != nil {
			return "", "", err
		}
	}
	if a.Key == nil {
		if c.keyField != "" {
			return "", "", invalidf("missing document key: the key field %q is absent or empty", c.keyField)
		}
		return "", "", invalidf("missing document key: the key function gave none")
	}
	if a.Kind == driver.Update {
		if err := c.checkMods(a.Mods); err != nil {
			return "", "", err
		}
	}
	key, err := c.storeKey(a.Doc, a.Key)
	if err != nil {
		return "", "", err
	}
	rev, err := c.revision(a.Doc)
	return key, rev, err
}

// checkMods refuses, before anything is read or sent, mods that would
// change where the document is stored: its key field or partition field
// (the document would stay under its old key, or in its old partition).
func (c *collection) checkMods(mods []driver.Mod) error {
	for _, m := range mods {
		switch f := m.FieldPath[0]; {
		case f == c.keyField && c.keyField != "":
			return invalidf("Update cannot change the key field %q: delete the document and create it under the new key", f)
		case f == c.opts.PartitionField && f != "":
			return invalidf("Update cannot change the partition field %q: delete the document and create it in the new partition", f)
		}
	}
	return nil
}

// runAtomic runs atomic writes as one Store.Transact.
func (c *collection) runAtomic(ctx context.Context, actions []*driver.Action) error {
	type prepared struct {
		a   *driver.Action
		key string
		rev etagstore.ETag
	}
	ps := make([]prepared, len(actions))
	for i, a := range actions {
		key, rev, err := c.target(a)
		if err != nil {
			return err
		}
		ps[i] = prepared{a, key, rev}
	}
	docs, err := c.store.Transact(ctx, func(tx *etagstore.Tx[raw]) error {
		for _, p := range ps {
			if err := c.txAction(tx, p.a, p.key, p.rev); err != nil {
				return refused{err}
			}
		}
		return nil
	})
	if r, ok := errors.AsType[refused](err); ok {
		return r.err
	}
	if err != nil {
		return err
	}
	etags := map[string]etagstore.ETag{}
	for _, d := range docs {
		etags[d.Key] = d.ETag
	}
	for _, p := range ps {
		if p.a.Kind != driver.Delete {
			if err := c.setRevision(p.a.Doc, etags[p.key], false); err != nil {
				return err
			}
		}
	}
	return nil
}

// refused carries an action's refusal (a stale revision: ErrConflict) out
// of the transaction function without matching ErrConflict there, which
// would make Transact run the function again: the revision is the
// caller's, and another run would find it just as stale.
type refused struct{ err error }

func (r refused) Error() string { return r.err.Error() }

// txAction buffers one atomic write in tx, checking its revision against
// the version tx read.
func (c *collection) txAction(tx *etagstore.Tx[raw], a *driver.Action, key string, rev etagstore.ETag) error {
	if a.Kind == driver.Put && rev == "" {
		// A Put without a revision overwrites whatever is stored: it
		// needs no read (Tx.Upsert).
		data, err := c.encode(a.Doc)
		if err != nil {
			return err
		}
		return tx.Upsert(key, data)
	}
	current, err := tx.ETag(key)
	if err != nil {
		return err
	}
	if err := txCheck(a.Kind, key, current, rev); err != nil {
		return err
	}
	switch a.Kind {
	case driver.Delete:
		if current == "" {
			return nil
		}
		return tx.Delete(key)
	case driver.Update:
		v, err := tx.Get(key)
		if err != nil {
			return err
		}
		if err := c.applyMods(&v, a.Mods); err != nil {
			return err
		}
		return tx.Put(key, v)
	}
	data, err := c.encode(a.Doc)
	if err != nil {
		return err
	}
	return tx.Put(key, data)
}

// txCheck refuses an atomic write of kind to key, whose version read is
// current ("" when missing), that the version or the revision rev rules
// out.
func txCheck(kind driver.ActionKind, key string, current, rev etagstore.ETag) error {
	switch {
	case kind == driver.Create && current != "":
		return fmt.Errorf("%w: docstore: %q", etagstore.ErrExists, key)
	case kind == driver.Create && rev != "":
		return invalidf("Create of a document with a revision")
	case rev != "" && current == "":
		return fmt.Errorf("%w: docstore: %q", etagstore.ErrNotFound, key)
	case rev != "" && current != rev:
		return fmt.Errorf("%w: docstore: %q is at another revision", etagstore.ErrConflict, key)
	case current == "" && (kind == driver.Replace || kind == driver.Update):
		return fmt.Errorf("%w: docstore: %q", etagstore.ErrNotFound, key)
	}
	return nil
}
