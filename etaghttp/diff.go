package etaghttp

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Change is one member of the document that a refused write would have
// changed: a 412 Problem lists them, and so does its Diff as text.
type Change struct {
	// Path is the member's JSON Pointer (RFC 6901) in the document as
	// this handler serves it, such as "/title" or "/tags/2".
	Path string `json:"path"`
	// Theirs is the member's value in the stored document; absent when
	// the stored document has no such member.
	Theirs json.RawMessage `json:"theirs,omitempty"`
	// Mine is the value the write would have stored; absent when it
	// would have removed the member.
	Mine json.RawMessage `json:"mine,omitempty"`
}

// changes lists the members in which mine differs from theirs, both
// marshaled to JSON, in path order: objects member by member, arrays of
// the same length element by element (otherwise as a whole). A member
// under a path in skip, or skip itself, is left out.
func changes(theirs, mine any, skip []string) []Change {
	a, errA := toJSONValue(theirs)
	b, errB := toJSONValue(mine)
	if errA != nil || errB != nil {
		return nil
	}
	var out []Change
	walkChanges("", a, b, true, true, func(c Change) {
		for _, s := range skip {
			if c.Path == s || strings.HasPrefix(c.Path, s+"/") {
				return
			}
		}
		out = append(out, c)
	})
	return out
}

func toJSONValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var x any
	err = d.Decode(&x)
	return x, err
}

func walkChanges(path string, a, b any, hasA, hasB bool, emit func(Change)) {
	if hasA && hasB {
		switch a := a.(type) {
		case map[string]any:
			if b, ok := b.(map[string]any); ok {
				keys := make([]string, 0, len(a)+len(b))
				for k := range a {
					keys = append(keys, k)
				}
				for k := range b {
					if _, ok := a[k]; !ok {
						keys = append(keys, k)
					}
				}
				slices.Sort(keys)
				for _, k := range keys {
					va, okA := a[k]
					vb, okB := b[k]
					walkChanges(path+"/"+escapePointer(k), va, vb, okA, okB, emit)
				}
				return
			}
		case []any:
			if b, ok := b.([]any); ok && len(a) == len(b) {
				for i := range a {
					walkChanges(path+"/"+strconv.Itoa(i), a[i], b[i], true, true, emit)
				}
				return
			}
		}
	}
	ra, rb := rawJSON(a, hasA), rawJSON(b, hasB)
	if hasA == hasB && bytes.Equal(ra, rb) {
		return
	}
	emit(Change{Path: path, Theirs: ra, Mine: rb})
}

func rawJSON(v any, present bool) json.RawMessage {
	if !present {
		return nil
	}
	// Maps marshal with sorted keys: equal values, equal bytes.
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// escapePointer escapes a member name for a JSON Pointer (RFC 6901 §3).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// maxDiffValue bounds each value shown in a Diff line, in bytes.
const maxDiffValue = 200

// diffText renders cs one per line: `/title: "theirs" → "mine"`, with
// (none) for an absent member and long values shortened with "…".
func diffText(cs []Change) string {
	var sb strings.Builder
	for _, c := range cs {
		path := c.Path
		if path == "" {
			path = "(document)"
		}
		sb.WriteString(path + ": " + shownValue(c.Theirs) + " → " + shownValue(c.Mine) + "\n")
	}
	return sb.String()
}

func shownValue(v json.RawMessage) string {
	if v == nil {
		return "(none)"
	}
	s := string(v)
	if len(s) > maxDiffValue {
		cut := maxDiffValue
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
