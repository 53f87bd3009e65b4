// Package members finds, in a stored document encoded as a JSON object
// (the JSON codec's documents, tablestore's entity properties), the
// members that a type does not know — written by a newer version of the
// type, or by another program — and adds them back to a new encoding, so
// that a write that starts from a read loses nothing it did not touch.
package members

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// Known is the member names a type knows. With Fold, a member's name is
// matched as encoding/json's decoder matches it to a field: exactly, or
// else folded (see Fold), so that a member "Title" is a field tagged
// "title": the type's, not unknown. A nil Names knows every name.
type Known struct {
	Names map[string]bool // with Fold, each name and its folded form
	Fold  bool
}

// Has reports whether name is known.
func (k Known) Has(name string) bool {
	return k.Names[name] || k.Fold && k.Names[Fold(name)]
}

// Fold is name folded as encoding/json folds a member's name to match it
// with a field's: ASCII letters to upper case, other letters by
// unicode.ToUpper(unicode.ToLower(r)).
func Fold(name string) string {
	out := make([]byte, 0, len(name))
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(name[i:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return string(out)
}

// Unknown returns the members of doc, a JSON object, whose names are not
// in known, as a fragment `"name":value,"name":value` in doc's order; nil
// when there are none (the usual case, which allocates nothing) or when
// doc is not a JSON object. A Known with nil Names knows every name.
func Unknown(doc []byte, known Known) []byte {
	if known.Names == nil {
		return nil
	}
	var out []byte
	each(doc, func(member, name []byte) {
		if !known.Has(string(name)) {
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
