// Package fieldmerge is the three-way merge of Go values field by field
// behind etagstore.MergeFields, and the comparison it and a
// ConflictError's Diff make (go-cmp, unexported fields included).
package fieldmerge

import (
	"reflect"

	"github.com/google/go-cmp/cmp"
)

// ExportAll lets cmp look into unexported fields instead of panicking.
var ExportAll = cmp.Exporter(func(reflect.Type) bool { return true })

// Merge merges mine and theirs, two edits of base, field by field,
// recursing into nested structs: a field changed on one side only takes
// that side's value; a field changed on both sides to the same value keeps
// it; a field changed on both sides to different values takes theirs and
// its path is among conflicts. Values that are not structs (slices, maps,
// pointers) and structs with unexported fields (time.Time) are compared
// whole; a conflict of the whole value is "(value)".
func Merge[T any](base, mine, theirs T) (out T, conflicts []string) {
	rv := reflect.ValueOf(&out).Elem()
	mergeValue("", reflect.ValueOf(&base).Elem(), reflect.ValueOf(&mine).Elem(), reflect.ValueOf(&theirs).Elem(), rv, &conflicts)
	return out, conflicts
}

// allExported reports whether t is a struct whose fields are all exported:
// only such structs are merged field by field.
func allExported(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			return false
		}
	}
	return true
}

func mergeValue(path string, base, mine, theirs, out reflect.Value, conflicts *[]string) {
	t := out.Type()
	if allExported(t) {
		for i := range t.NumField() {
			f := t.Field(i)
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			mergeValue(p, base.Field(i), mine.Field(i), theirs.Field(i), out.Field(i), conflicts)
		}
		return
	}
	mineChanged := !equal(base, mine)
	theirsChanged := !equal(base, theirs)
	switch {
	case mineChanged && theirsChanged && !equal(mine, theirs):
		if path == "" {
			path = "(value)"
		}
		*conflicts = append(*conflicts, path)
		out.Set(theirs)
	case mineChanged:
		out.Set(mine)
	default:
		out.Set(theirs)
	}
}

func equal(a, b reflect.Value) bool {
	return cmp.Equal(a.Interface(), b.Interface(), ExportAll)
}
