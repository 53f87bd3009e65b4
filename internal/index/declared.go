package index

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// This file is a Store's indexes as it declares them, generic in T (the
// root's Index[T] holds a Decl): checked once, the values a document of
// T holds in each, and when it expires by the expiry index.

// Decl is an index as a Store of T declares it: Unique or not, the
// values a document holds (Of) and, for an expiry index, the instant it
// expires (At; Of is then its stamp).
type Decl[T any] struct {
	Name   string
	Unique bool
	Of     func(T) []string
	At     func(T) time.Time
}

// Def is d as a Set knows it.
func (d Decl[T]) Def() Def { return Def{Name: d.Name, Unique: d.Unique, Expires: d.At != nil} }

func (d Decl[T]) String() string { return fmt.Sprintf("index %q", d.Name) }

// Holds reports whether v, the document of key, holds value in d.
func (d Decl[T]) Holds(key string, v T, value string) (bool, error) {
	vals, err := Values(d.Name, key, d.Of, v)
	return slices.Contains(vals, value), err
}

// Expires is when v, the document of key, expires by d, an expiry
// index. The index function's panic is an error of the read or write
// asking.
func (d Decl[T]) Expires(key string, v T) (at time.Time, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = driver.Errorf(driver.ErrInvalidInput, "the Expiry function panicked on %q: %v", key, r)
		}
	}()
	return d.At(v), nil
}

// Declared are a Store's indexes: the untyped Set the engine asks for
// their entries (engine.Implier), and the declarations. Nil is none.
type Declared[T any] struct {
	Set      *Set
	Decls    []Decl[T]
	Err      error    // the declaration's refusal: every write and read fails with it
	Expiring *Decl[T] // the expiry index of Decls, found once (nil: none, or Err)
}

// Declare is the indexes decls of a Store of T over b, whose stored
// documents decode reads (nil for none).
func Declare[T any](b driver.Backend, decode func(key string, data []byte) (T, error), decls []Decl[T]) *Declared[T] {
	if len(decls) == 0 {
		return nil
	}
	x := &Declared[T]{Decls: decls}
	ds := make([]Def, len(decls))
	for i, d := range decls {
		if d.Of == nil {
			x.Err = driver.Errorf(driver.ErrInvalidInput, "index %q has no function (use Unique, Lookup or Expiry)", d.Name)
			return x
		}
		if d.At != nil && slices.ContainsFunc(decls[:i], func(e Decl[T]) bool { return e.At != nil }) {
			x.Err = driver.Errorf(driver.ErrInvalidInput, "a Store has one expiry index, not two")
			return x
		}
		ds[i] = d.Def()
	}
	x.Set, x.Err = New(b, ds, func(key string, data []byte) ([][]string, error) {
		v, err := decode(key, data)
		if err != nil {
			return nil, err
		}
		return x.values(key, v)
	})
	if i := slices.IndexFunc(decls, func(d Decl[T]) bool { return d.At != nil }); i >= 0 && x.Err == nil {
		x.Expiring = &decls[i]
	}
	return x
}

// values are the values v holds, per index (Values).
func (x *Declared[T]) values(key string, v T) (out [][]string, err error) {
	out = make([][]string, len(x.Decls))
	for i, d := range x.Decls {
		if out[i], err = Values(d.Name, key, d.Of, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// KeepsEntries reports whether x keeps entries a write changes, which
// need the version it replaces (or refuses every write): false without
// indexes, and for an Expiry alone over a backend that keeps no entries.
func (x *Declared[T]) KeepsEntries() bool {
	return x != nil && (x.Set == nil || !x.Set.Entryless())
}

// Find is the index of x named name, or the error of a read by it.
func (x *Declared[T]) Find(name string) (Decl[T], error) {
	if x == nil {
		return Decl[T]{}, driver.Errorf(driver.ErrInvalidInput, "index %q is not declared on this Store (pass it to New)", name)
	}
	if x.Err != nil {
		return Decl[T]{}, x.Err
	}
	for _, d := range x.Decls {
		if d.Name == name {
			return d, nil
		}
	}
	return Decl[T]{}, driver.Errorf(driver.ErrInvalidInput, "index %q is not declared on this Store (pass it to New)", name)
}

// Implier is what the engine asks for the entries of x's writes: its Set,
// or, when the declaration was refused, a refusal of every write.
func (x *Declared[T]) Implier() engine.Implier {
	if x.Err != nil {
		return Refusing{Err: x.Err}
	}
	return x.Set
}

// Expiry is x's expiry index, if it has one.
func (x *Declared[T]) Expiry() (Decl[T], bool) {
	if x == nil || x.Expiring == nil {
		return Decl[T]{}, false
	}
	return *x.Expiring, true
}

// At is when a stored document of key expires by x's expiry index,
// which decode reads from its data (nil without one).
func (x *Declared[T]) At(decode func(key string, data []byte) (T, error)) func(key string, data []byte) (time.Time, error) {
	d, ok := x.Expiry()
	if !ok {
		return nil
	}
	return func(key string, data []byte) (time.Time, error) {
		v, err := decode(key, data)
		if err != nil {
			return time.Time{}, err
		}
		return d.Expires(key, v)
	}
}

// Stamping is b, whose writes carry when their documents expire by at
// (Stamping), when x expires documents over a backend that keeps no
// entries (blobs: the instant goes in the blob's metadata, so that a
// sweep lists it); b itself otherwise.
func (x *Declared[T]) Stamping(b driver.Backend, at func(key string, data []byte) (time.Time, error)) driver.Backend {
	if at == nil || x == nil || x.Set == nil || !x.Set.Entryless() {
		return b
	}
	return Stamping(b, at)
}

// ExpiryName names the expiry index of documents of type t: "x" and its
// name's letters (up to 16), then 8 hex digits of a hash of its package
// path and name, within MaxName.
func ExpiryName(t reflect.Type) string {
	var b strings.Builder
	b.WriteString("x")
	for _, r := range t.Name() {
		if b.Len() == 17 {
			break
		}
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			b.WriteRune(r)
		}
	}
	sum := sha256.Sum256([]byte(t.PkgPath() + "." + t.String()))
	return b.String() + "-" + hex.EncodeToString(sum[:4])
}
