package index

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// This file names entries. An entry's name (driver.Entries.Key makes its
// key from it, in its document's commit scope) is
//
//	u.<index>.<value>            a unique index: one entry per value
//	l.<index>.<value>.<doc>      a lookup index: one per value and document
//	x.<index>.<stamp>.<doc>      an expiry index: one per document
//
// where <value> and <doc> (the document's key after its scope) are
// base64 without padding in an alphabet in ASCII order ("-", digits,
// upper case, "_", lower case), which keeps the order of the texts'
// bytes, so that a value's lookup entries list in its documents' key
// order; or, when that is longer than the room left, "~" (after every
// letter of the alphabet) and the hex SHA-256 of the text. Neither
// alphabet holds ".", so "l.<index>.<value>." is the prefix of exactly
// the lookup entries of one value. The entry keeps the whole value and
// key, so that a shared hash is never taken for the same value. An
// expiry's <stamp> is its instant in milliseconds since 1970 in 13
// decimal digits (Stamp), so that a scope's expiry entries list in time
// order and those due by an instant are one range of names (Due).

// MaxName bounds an index's name: letters, digits, "_" and "-".
const MaxName = 32

const (
	uniqueRoom = driver.MaxEntryName - len("u..") - MaxName
	lookupRoom = (driver.MaxEntryName - len("l...") - MaxName) / 2
)

// Reserved reports whether prefix reaches into the keys space keeps
// entries under (driver.Entries: after the scope, U+FFFF; nil: none),
// which no document has.
func Reserved(space *driver.Entries, prefix string) bool {
	if space == nil {
		return false
	}
	scope, err := space.Scope(prefix)
	return err == nil && strings.HasPrefix(prefix[len(scope):], "\uFFFF")
}

// CheckName refuses an index name that is empty, too long, or holds other
// than letters, digits, "_" and "-" (ErrInvalidInput).
func CheckName(name string) error {
	if name == "" || len(name) > MaxName {
		return driver.Errorf(driver.ErrInvalidInput, "index name %q: 1 to %d letters, digits, '_' or '-'", name, MaxName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return driver.Errorf(driver.ErrInvalidInput, "index name %q: 1 to %d letters, digits, '_' or '-'", name, MaxName)
		}
	}
	return nil
}

// ordered is base64 in an alphabet in ASCII order: encodings compare as
// the bytes they encode.
var ordered = base64.NewEncoding("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz").WithPadding(base64.NoPadding)

// encode is s in a name: ordered base64, or "~" and its hash when longer
// than room.
func encode(s string, room int) string {
	if e := ordered.EncodeToString([]byte(s)); len(e) <= room {
		return e
	}
	sum := sha256.Sum256([]byte(s))
	return "~" + hex.EncodeToString(sum[:])
}

// uniqueName is the name of the entry of value in unique index idx.
func uniqueName(idx, value string) string { return "u." + idx + "." + encode(value, uniqueRoom) }

// lookupPrefix starts the names of the entries of value in lookup index idx.
func lookupPrefix(idx, value string) string {
	return "l." + idx + "." + encode(value, lookupRoom) + "."
}

// lookupName is the name of doc's entry of value in lookup index idx
// (rest: doc's key after its scope).
func lookupName(idx, value, rest string) string {
	return lookupPrefix(idx, value) + encode(rest, lookupRoom)
}

// expiryName is the name of doc's entry of stamp in expiry index idx
// (rest: doc's key after its scope).
func expiryName(idx, stamp, rest string) string {
	return "x." + idx + "." + stamp + "." + encode(rest, lookupRoom)
}

// indexPrefix starts the names of every entry of index d.
func indexPrefix(d Def) string {
	switch {
	case d.Unique:
		return "u." + d.Name + "."
	case d.Expires:
		return "x." + d.Name + "."
	}
	return "l." + d.Name + "."
}

// stampDigits is a stamp's width: milliseconds up to the year 2286.
const stampDigits = 13

// Stamp is t as an expiry index's value: milliseconds since 1970, rounded
// up (a stamp is never before its instant, so that a sweep of the stamps
// due never deletes a document before it has expired), in stampDigits
// digits, clamped to the width (so that stamps compare as the instants
// do); "" for the zero time (never).
func Stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	ms = min(max(ms, 0), 9_999_999_999_999)
	return fmt.Sprintf("%0*d", stampDigits, ms)
}

// Unstamp is the instant of a stamp (false: not one).
func Unstamp(stamp string) (time.Time, bool) {
	ms, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil || len(stamp) != stampDigits {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

func init() { // the rooms fit the backend's bound
	if len("l...")+MaxName+2*lookupRoom > driver.MaxEntryName || len("~")+2*sha256.Size > lookupRoom {
		panic(fmt.Sprintf("index: names do not fit in %d bytes", driver.MaxEntryName))
	}
}
