// Package extra is what a Doc carries beside its value so that writing
// it back applies its change to the document it was read from
// (etagstore.Extra holds an Extra): that document, when it holds more
// than T encodes, T's encoding of its value, and its version's
// bookkeeping; and the writes of a Doc's change onto that document or a
// later version (Onto, ChangeOnto), through T's codec.
package extra

import (
	"bytes"
	"slices"
	"strings"
	"unsafe"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/members"
)

// Extra is the state of an etagstore.Extra (see there). The zero Extra
// holds none: a Doc with it writes T alone.
type Extra struct {
	Doc     string      // the stored document, when it holds more than T encodes; "" otherwise
	ETag    driver.ETag // the version Doc is
	Meta    string      // the version's bookkeeping (driver.Item.Meta); "" when not known
	Unknown string      // Doc's top-level members T does not know (Names)
	Beyond  bool        // Doc holds a member T does not know, at some depth
	Drop    string      // the members Without drops, each name ended by NUL
	Base    string      // T's encoding of the version's value; "" for a Doc built by hand
}

// Of is the Extra of it, a stored document, whose value T encodes as
// baseline (nil: the same as stored); merges says T's codec applies a
// change to a stored document, known are the members T knows. With a
// codec that merges it keeps baseline, so that a write of the Doc over a
// later version (ETagAny) applies only the Doc's change to it (see
// ChangeOnto).
func Of(it driver.Item, baseline []byte, merges bool, known members.Known) Extra {
	if !merges {
		return Extra{Meta: it.Meta}
	}
	if baseline == nil || bytes.Equal(it.Data, baseline) {
		return Extra{ETag: it.ETag, Meta: it.Meta, Base: frozen(it.Data)}
	}
	return Extra{Doc: string(it.Data), ETag: it.ETag, Meta: it.Meta, Base: frozen(baseline),
		Unknown: string(members.Unknown(it.Data, known)), Beyond: members.Beyond(it.Data, baseline)}
}

// At reports whether e holds the stored document of the version etag
// names (the Doc's read, not since replaced): Stored.
func (e Extra) At(etag driver.ETag) bool {
	return e.ETag == etag && etag != driver.ETagAny && !etag.Superseded() && e.Stored() != ""
}

// Stored is the document of e's version as stored, when e holds it.
func (e Extra) Stored() string {
	if e.Doc != "" {
		return e.Doc
	}
	return e.Base
}

// Names returns the names of the top-level members e holds that T does
// not know.
func (e Extra) Names() []string { return members.Names([]byte(e.Unknown)) }

// Equal reports whether e and o hold the same document.
func (e Extra) Equal(o Extra) bool { return e.Doc == o.Doc && e.Drop == o.Drop }

// Without returns e without the top-level member name, which T does not
// know: a write of the Doc then removes it from the stored document and
// keeps the rest. A name e does not hold changes nothing.
func (e Extra) Without(name string) Extra {
	if e.Doc == "" || !slices.Contains(members.Names([]byte(e.Unknown)), name) {
		return e
	}
	e.Drop += name + "\x00"
	e.Unknown = string(members.Without([]byte("{"+e.Unknown+"}"), name))
	e.Unknown = e.Unknown[1 : len(e.Unknown)-1]
	return e
}

// dropped returns baseline, T's encoding of e's document, with the
// members Without dropped added as they are stored: to the merge they
// are then members T had and removed (see Onto).
func (e Extra) dropped(baseline []byte) []byte {
	for _, name := range strings.Split(strings.TrimSuffix(e.Drop, "\x00"), "\x00") {
		baseline = members.Add(baseline, members.Only([]byte(e.Doc), name))
	}
	return baseline
}

// Superseded is the Extra of a state a group-commit batch's member left
// (data, T's encoding of it) that was never stored as a version of its
// own (etag, a superseded ETag): a write of its Doc over a later version
// (ETagAny) applies only its own change, from that state. Nothing else
// of e applies to it.
func (e Extra) Superseded(etag driver.ETag, data []byte) Extra {
	if e.Base == "" {
		return Extra{Meta: e.Meta} // a codec that cannot merge
	}
	return Extra{ETag: etag, Meta: e.Meta, Base: frozen(data)}
}

// frozen is b as a string, sharing its bytes: an encoding a Store wrote
// or read is read-only once made, as a string is (see driver.Item), so
// keeping it in a Doc costs no copy.
func frozen(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Onto is the write of mine, T's encoding of a Doc's value, over the
// document x holds (the Doc's read): its change applied to that
// document, with the changes a merging backend sends when the write is
// conditioned on that very version (etag). A zero Extra writes mine alone.
func Onto[T any](enc codec.Of[T], key string, etag driver.ETag, x Extra, mine []byte) (codec.Written, error) {
	if x.Doc == "" {
		return codec.Whole(mine), nil
	}
	b := engine.Version{Item: driver.Item{Key: key, Data: []byte(x.Doc), ETag: x.ETag}, Exists: true}
	var baseline []byte
	if x.Drop != "" {
		_, base, err := enc.StartFrom(b)
		if err != nil {
			return codec.Written{}, err
		}
		baseline = x.dropped(base)
	}
	w, err := enc.Apply(b, baseline, mine)
	if x.ETag != etag {
		w.Changes = nil // not the version the write is conditioned on
	}
	return w, err
}

// ChangeOnto is the write of mine, T's encoding of a Doc's value, over
// b, a version of the Doc's key read just now: the Doc's change (from T's
// encoding of the version it was read from, x.Base, to mine) applied to
// b's document, so that what others changed since the Doc's read stays.
// A Doc built by hand (no x.Base) writes mine alone: T, whole.
func ChangeOnto[T any](enc codec.Of[T], b engine.Version, x Extra, mine []byte) (codec.Written, error) {
	if x.Base == "" {
		return codec.Whole(mine), nil
	}
	baseline := []byte(x.Base)
	if x.Drop != "" {
		baseline = x.dropped(baseline)
	}
	return enc.Apply(b, baseline, mine)
}
