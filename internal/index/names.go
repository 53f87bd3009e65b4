package index

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/etagstore/etagstore/driver"
)

// This file names entries. An entry's name (driver.Entries.Key makes its
// key from it, in its document's commit scope) is
//
//	u.<index>.<value>            a unique index: one entry per value
//	l.<index>.<value>.<doc>      a lookup index: one per value and document
//
// where <value> and <doc> (the document's key after its scope) are
// base64 without padding in an alphabet in ASCII order ("-", digits,
// upper case, "_", lower case), which keeps the order of the texts'
// bytes, so that a value's lookup entries list in its documents' key
// order; or, when that is longer than the room left, "~" (after every
// letter of the alphabet) and the hex SHA-256 of the text. Neither
// alphabet holds ".", so "l.<index>.<value>." is the prefix of exactly
// the lookup entries of one value. The entry keeps the whole value and
// key, so that a shared hash is never taken for the same value.

// MaxName bounds an index's name: letters, digits, "_" and "-".
const MaxName = 32

const (
	uniqueRoom = driver.MaxEntryName - len("u..") - MaxName
	lookupRoom = (driver.MaxEntryName - len("l...") - MaxName) / 2
)

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

// indexPrefix starts the names of every entry of index d.
func indexPrefix(d Def) string {
	if d.Unique {
		return "u." + d.Name + "."
	}
	return "l." + d.Name + "."
}

func init() { // the rooms fit the backend's bound
	if len("l...")+MaxName+2*lookupRoom > driver.MaxEntryName || len("~")+2*sha256.Size > lookupRoom {
		panic(fmt.Sprintf("index: names do not fit in %d bytes", driver.MaxEntryName))
	}
}
