package etaghttp

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/etagstore/etagstore"
)

// This file evaluates If-Match and If-None-Match the way RFC 9110 §13.1
// says: entity tags are compared as the opaque strings they are, never
// decoded. A tag this server never issued is well-formed and simply
// matches nothing; only broken syntax is an error.

// entityTag is one entity tag of a request header.
type entityTag struct {
	opaque string // with its quotes, as sent
	weak   bool
}

// condition is a parsed If-Match or If-None-Match header: absent, "*",
// or a list of entity tags.
type condition struct {
	present bool
	any     bool
	tags    []entityTag
}

// parseCondition parses every field line named name in h (RFC 9110:
// "*" / #entity-tag). Broken syntax matches ErrBadETag.
func parseCondition(h http.Header, name string) (condition, error) {
	value := strings.TrimSpace(strings.Join(h.Values(name), ","))
	if value == "" {
		return condition{}, nil
	}
	if value == "*" {
		return condition{present: true, any: true}, nil
	}
	c := condition{present: true}
	for rest := value; ; {
		rest = strings.TrimLeft(rest, " \t,")
		if rest == "" {
			return c, nil
		}
		t, after, err := cutEntityTag(rest)
		if err != nil {
			return condition{}, fmt.Errorf("%w in %s: %q", ErrBadETag, name, value)
		}
		c.tags = append(c.tags, t)
		rest = strings.TrimLeft(after, " \t")
		if rest != "" && rest[0] != ',' {
			return condition{}, fmt.Errorf("%w in %s: %q", ErrBadETag, name, value)
		}
	}
}

// cutEntityTag reads one entity-tag ([W/] DQUOTE *etagc DQUOTE) from the
// start of s.
func cutEntityTag(s string) (entityTag, string, error) {
	var t entityTag
	if strings.HasPrefix(s, "W/") {
		t.weak, s = true, s[2:]
	}
	if s == "" || s[0] != '"' {
		return t, "", ErrBadETag
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			t.opaque = s[:i+1]
			return t, s[i+1:], nil
		case c < 0x21 || c == 0x7f: // etagc = %x21 / %x23-7E / obs-text
			return t, "", ErrBadETag
		}
	}
	return t, "", ErrBadETag
}

// matchStrong reports whether c holds the current version's tag under the
// strong comparison If-Match requires: a weak tag never matches.
func (c condition) matchStrong(current etagstore.ETag) bool {
	want := FormatETag(current)
	for _, t := range c.tags {
		if !t.weak && t.opaque == want {
			return true
		}
	}
	return c.any
}

// matchWeak reports whether c holds the current version's tag under the
// weak comparison If-None-Match uses.
func (c condition) matchWeak(current etagstore.ETag) bool {
	want := FormatETag(current)
	for _, t := range c.tags {
		if t.opaque == want {
			return true
		}
	}
	return c.any
}

// weakOnly reports whether every tag of c is weak (and so can never pass
// If-Match).
func (c condition) weakOnly() bool {
	for _, t := range c.tags {
		if !t.weak {
			return false
		}
	}
	return len(c.tags) > 0
}
