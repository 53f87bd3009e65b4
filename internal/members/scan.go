package members

import "bytes"

// The JSON scanning both this package and tablestore's entity decoder use:
// indexes into a document, without decoding it.

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index after the JSON string starting at doc[i]
// (a '"'), or -1.
func SkipString(doc []byte, i int) int {
	j := i + 1
	for {
		q := bytes.IndexByte(doc[j:], '"')
		if q < 0 {
			return -1
		}
		j += q
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for k := j - 1; k > i && doc[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// SkipValue returns the index after the JSON value starting at doc[i], or
// -1.
func SkipValue(doc []byte, i int) int {
	if i >= len(doc) {
		return -1
	}
	switch doc[i] {
	case '"':
		return SkipString(doc, i)
	case '{', '[':
		return skipNested(doc, i)
	}
	j := i
	for j < len(doc) && !endsLiteral(doc[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// endsLiteral reports whether c ends a number, true, false or null.
func endsLiteral(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t'
}

// skipNested returns the index after the object or array starting at
// doc[i], or -1.
func skipNested(doc []byte, i int) int {
	depth := 0
	for j := i; j < len(doc); j++ {
		switch doc[j] {
		case '"':
			if j = SkipString(doc, j); j < 0 {
				return -1
			}
			j--
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}
