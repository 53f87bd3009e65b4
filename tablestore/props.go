package tablestore

// The JSON of entity properties, scanned and written without encoding/json:
// an entity is one flat JSON object, read once and written once per
// operation (see EntityCodec.Decode), so this is the table path's hot loop.

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/etagstore/etagstore/internal/members"
)

// errNotObject is the scanners' error for a document that is not a JSON
// object of properties.
var errNotObject = errors.New("not a JSON object of properties")

// eachMember calls f with the name (unquoted) and the raw JSON value of each
// member of the JSON object doc, and with the member's bytes (from its
// name's opening quote to the end of its value), in doc's order. It stops
// early when f returns false. Values are delimited, not validated: the
// decoders of the values a caller uses check them.
func eachMember(doc []byte, f func(name, value, member []byte) bool) error {
	i := members.SkipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return errNotObject
	}
	i = members.SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return trailing(doc, i+1)
	}
	for {
		name, v, end, err := nextMember(doc, i)
		if err != nil {
			return err
		}
		if !f(name, doc[v:end], doc[i:end]) {
			return nil
		}
		i = members.SkipSpace(doc, end)
		switch {
		case i < len(doc) && doc[i] == ',':
			i = members.SkipSpace(doc, i+1)
		case i < len(doc) && doc[i] == '}':
			return trailing(doc, i+1)
		default:
			return errNotObject
		}
	}
}

// nextMember parses the member starting at doc[i]: its name, unquoted, and
// where its value starts and ends.
func nextMember(doc []byte, i int) (name []byte, value, end int, err error) {
	if i >= len(doc) || doc[i] != '"' {
		return nil, 0, 0, errNotObject
	}
	q := members.SkipString(doc, i)
	if q < 0 {
		return nil, 0, 0, errNotObject
	}
	name, ok := memberName(doc[i:q])
	if !ok {
		return nil, 0, 0, errNotObject
	}
	i = members.SkipSpace(doc, q)
	if i >= len(doc) || doc[i] != ':' {
		return nil, 0, 0, errNotObject
	}
	value = members.SkipSpace(doc, i+1)
	if end = members.SkipValue(doc, value); end < 0 {
		return nil, 0, 0, errNotObject
	}
	return name, value, end, nil
}

// memberName is the quoted name q unquoted; without escapes (the usual
// case) it is converted without decoding.
func memberName(q []byte) ([]byte, bool) {
	if bytes.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1], true
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

func trailing(doc []byte, i int) error {
	if members.SkipSpace(doc, i) != len(doc) {
		return errNotObject
	}
	return nil
}

// class tells, for each byte of a JSON string's content, whether it needs
// a look (special): the bytes a string cannot hold unescaped (controls,
// '"', '\\'), the ones encoding/json escapes ('<', '>', '&'), and 0xE2, the
// first byte of U+2028 and U+2029, which it escapes too. Any other byte's
// class is the number of UTF-16 code units of the character it starts: 1
// for ASCII and the first byte of a two- or three-byte sequence, 2 for the
// first of four, 0 for a continuation byte.
var class = func() (c [256]uint8) {
	for b := range 256 {
		switch {
		case b < 0x20, b == '"', b == '\\', b == '<', b == '>', b == '&', b == 0xE2:
			c[b] = special
		case b >= 0x80 && b < 0xC0:
			c[b] = 0
		case b >= 0xF0:
			c[b] = 2
		default:
			c[b] = 1
		}
	}
	return c
}()

const special = 0xFF

const hexDigits = "0123456789abcdef"

// shortEscapes maps the letter of a short escape to its character.
var shortEscapes = [256]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// appendString appends s as a JSON string exactly as encoding/json writes
// it (which is how the Table SDK hands entities back: HTML characters,
// U+2028 and U+2029 escaped), and returns s's length in UTF-16 code units.
// s is valid UTF-8.
func appendString(dst []byte, s string) ([]byte, int) {
	dst = append(dst, '"')
	units, start := 0, 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		c := class[b]
		if c != special {
			units += int(c)
			continue
		}
		if b == 0xE2 {
			units++
			if i+2 >= len(s) || s[i+1] != 0x80 || s[i+2]&^1 != 0xA8 {
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xF]) // U+2028, U+2029
			i += 2
			start = i + 1
			continue
		}
		units++
		dst = append(dst, s[start:i]...)
		dst = appendEscape(dst, b)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), units
}

// appendEscape appends the escape encoding/json writes for the ASCII byte b.
func appendEscape(dst []byte, b byte) []byte {
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
}

// jsonText is a JSON string value decoded: its text, whether its bytes
// are exactly what appendString writes for that text (canonical), and its
// length in UTF-16 code units.
type jsonText struct {
	text      string
	canonical bool
	units     int
}

// unquote decodes the JSON string q (with its quotes). Bytes that are not
// valid UTF-8 become U+FFFD, as encoding/json decodes them.
func unquote(q []byte) (jsonText, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return jsonText{}, errors.New("not a JSON string")
	}
	in := q[1 : len(q)-1]
	if !utf8.Valid(in) {
		var s string
		if err := json.Unmarshal(q, &s); err != nil {
			return jsonText{}, err
		}
		return jsonText{text: s, units: utf16Len(s)}, nil
	}
	units, i := 0, 0
	for ; i < len(in); i++ {
		c := class[in[i]]
		if c == special {
			break
		}
		units += int(c)
	}
	if i == len(in) { // nothing to unescape or check: the usual case
		return jsonText{text: string(in), canonical: true, units: units}, nil
	}
	return unescape(in, i)
}

// unescape decodes in, the content of a JSON string with valid UTF-8 whose
// first special byte is at i.
func unescape(in []byte, i int) (jsonText, error) {
	var sb strings.Builder
	sb.Grow(len(in))
	canonical := true
	start := 0
	for ; i < len(in); i++ {
		b := in[i]
		if class[b] != special {
			continue
		}
		sb.Write(in[start:i])
		switch {
		case b == '\\':
			n, c, err := unescapeOne(&sb, in[i:])
			if err != nil {
				return jsonText{}, err
			}
			canonical = canonical && c
			i += n - 1
		case b < 0x20 || b == '"':
			return jsonText{}, errors.New("invalid character in JSON string")
		case b == 0xE2:
			canonical = canonical && !(i+2 < len(in) && in[i+1] == 0x80 && in[i+2]&^1 == 0xA8)
			sb.WriteByte(b)
		default: // '<', '>', '&', which encoding/json escapes
			canonical = false
			sb.WriteByte(b)
		}
		start = i + 1
	}
	sb.Write(in[start:])
	s := sb.String()
	return jsonText{text: s, canonical: canonical, units: utf16Len(s)}, nil
}

// unescapeOne writes the character the escape at the start of in stands
// for, and returns the escape's length and whether encoding/json would
// have written that character so.
func unescapeOne(sb *strings.Builder, in []byte) (n int, canonical bool, err error) {
	if len(in) < 2 {
		return 0, false, errors.New("invalid escape in JSON string")
	}
	switch c := in[1]; c {
	case '"', '\\', '/':
		sb.WriteByte(c)
		return 2, c != '/', nil
	case 'b', 'f', 'n', 'r', 't':
		sb.WriteByte(shortEscapes[c])
		return 2, true, nil
	case 'u':
	default:
		return 0, false, errors.New("invalid escape in JSON string")
	}
	r, ok := hex4(in[2:])
	if !ok {
		return 0, false, errors.New("invalid \\u escape in JSON string")
	}
	n = 6
	if utf16.IsSurrogate(r) {
		r2, ok := rune(0), false
		if len(in) >= 12 && in[6] == '\\' && in[7] == 'u' {
			r2, ok = hex4(in[8:])
		}
		if r = utf16.DecodeRune(r, r2); ok && r != utf8.RuneError {
			n = 12
		}
	}
	sb.WriteRune(r)
	return n, bytes.Equal(in[:n], escapeOf(r)), nil
}

// escapeOf is the escape encoding/json writes for r; nil when it writes r
// as it is.
func escapeOf(r rune) []byte {
	switch {
	case r < utf8.RuneSelf && class[r] == special:
		return appendEscape(nil, byte(r))
	case r == '\u2028' || r == '\u2029':
		return []byte{'\\', 'u', '2', '0', '2', hexDigits[r&0xF]}
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// utf16Len is the length of s, valid UTF-8, in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if c := class[s[i]]; c == special {
			n++
		} else {
			n += int(c)
		}
	}
	return n
}
