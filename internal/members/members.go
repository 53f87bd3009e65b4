// Package members finds, in a stored document encoded as a JSON object
// (the JSON codec's documents, tablestore's entity properties), the
// members that a type does not know — written by a newer version of the
// type, or by another program — and adds them back to a new encoding, so
// that a write that starts from a read loses nothing it did not touch.
package members

import (
	"bytes"
	"encoding/json"
)

// Unknown returns the members of doc, a JSON object, whose names are not
// in known, as a fragment `"name":value,"name":value` in doc's order; nil
// when there are none (the usual case, which allocates nothing) or when
// doc is not a JSON object. A nil known knows every name.
func Unknown(doc []byte, known map[string]bool) []byte {
	if known == nil {
		return nil
	}
	var out []byte
	each(doc, func(member, name []byte) {
		if !known[string(name)] {
			if out != nil {
				out = append(out, ',')
			}
			out = append(out, member...)
		}
	})
	return out
}

// Add returns doc, a JSON object, with the members of fragment (as
// Unknown returns it) appended; doc itself when fragment is empty.
func Add(doc, fragment []byte) []byte {
	if len(fragment) == 0 {
		return doc
	}
	doc = bytes.TrimRight(doc, " \t\r\n")
	if len(doc) < 2 || doc[len(doc)-1] != '}' {
		return doc
	}
	out := make([]byte, 0, len(doc)+len(fragment)+1)
	out = append(out, doc[:len(doc)-1]...)
	if !bytes.Equal(bytes.TrimSpace(doc[:len(doc)-1]), []byte("{")) {
		out = append(out, ',')
	}
	out = append(out, fragment...)
	return append(out, '}')
}

// Names returns the names of the members of fragment.
func Names(fragment []byte) []string {
	var names []string
	each(append(append([]byte("{"), fragment...), '}'), func(_, name []byte) { names = append(names, string(name)) })
	return names
}

// each calls f with every member of the JSON object doc (its bytes, from
// the name's opening quote to the end of its value) and its name, decoded.
// It stops at the first syntax error.
func each(doc []byte, f func(member, name []byte)) {
	i := SkipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return
	}
	i = SkipSpace(doc, i+1)
	for i < len(doc) && doc[i] == '"' {
		start := i
		end := SkipString(doc, i)
		if end < 0 {
			return
		}
		name := doc[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			if json.Unmarshal(doc[i:end], &s) != nil {
				return
			}
			name = []byte(s)
		}
		i = SkipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return
		}
		i = SkipValue(doc, SkipSpace(doc, i+1))
		if i < 0 {
			return
		}
		f(doc[start:i], name)
		i = SkipSpace(doc, i)
		if i < len(doc) && doc[i] == ',' {
			i = SkipSpace(doc, i+1)
		}
	}
}
