// Package fence carries a write's fencing token in its context (the
// root's WithFence and FenceFrom), for the root and the layers below it
// that deliver writes.
package fence

import (
	"context"

	"github.com/etagstore/etagstore/driver"
)

// key is the context key of a fencing token.
type key struct{}

// With returns ctx carrying token.
func With(ctx context.Context, token int64) context.Context {
	return context.WithValue(ctx, key{}, token)
}

// From returns the fencing token ctx carries, if any.
func From(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(key{}).(int64)
	return t, ok
}

// Ungrouped reports whether ctx's writes commit on their own: fenced, or
// marked so (driver.Ungrouped).
func Ungrouped(ctx context.Context) bool {
	if _, fenced := From(ctx); fenced {
		return true
	}
	return driver.IsUngrouped(ctx)
}
