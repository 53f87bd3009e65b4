package members

import (
	"bytes"
	"strconv"
)

// Repeated returns the path ("Addr" or "Addr.City", "Items[1].Name") of
// the first member that an object of doc, at any depth, holds twice by
// the same name, or "" when none does. encoding/json reads such a
// document as one value built from every occurrence, which no merge can
// apply a change to without dropping some of it: a write over it is
// refused instead (see Merge).
func Repeated(doc []byte) string {
	doc = bytes.TrimSpace(doc)
	switch {
	case len(doc) == 0:
		return ""
	case doc[0] == '{':
		var path string
		seen := map[string]bool{}
		each(doc, func(raw, name []byte) {
			if path != "" {
				return
			}
			if seen[string(name)] {
				path = string(name)
				return
			}
			seen[string(name)] = true
			i := SkipSpace(raw, SkipString(raw, 0))
			if inner := Repeated(raw[SkipSpace(raw, i+1):]); inner != "" {
				path = string(name) + "." + inner
				if inner[0] == '[' {
					path = string(name) + inner
				}
			}
		})
		return path
	case doc[0] == '[':
		i, n := SkipSpace(doc, 1), 0
		for i < len(doc) && doc[i] != ']' {
			end := SkipValue(doc, i)
			if end < 0 {
				return ""
			}
			if inner := Repeated(doc[i:end]); inner != "" {
				sep := "."
				if inner[0] == '[' {
					sep = ""
				}
				return "[" + strconv.Itoa(n) + "]" + sep + inner
			}
			n++
			i = SkipSpace(doc, end)
			if i < len(doc) && doc[i] == ',' {
				i = SkipSpace(doc, i+1)
			}
		}
	}
	return ""
}
