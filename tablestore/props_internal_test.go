package tablestore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"
)

// awkward holds every character class the JSON writer and reader treat
// apart: controls, the short escapes, quotes, HTML characters, U+2028 and
// U+2029, two- to four-byte runes.
var awkward = []rune("ab\x00\x01\x1f\b\f\n\r\t\"\\/<>&\u2028\u2029\u2027\u202aé€😀𝄞\u007f\u00a0\ufffd")

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range rng.IntN(n) {
		b.WriteRune(awkward[rng.IntN(len(awkward))])
	}
	return b.String()
}

// TestAppendStringIsEncodingJSON: the table path writes strings byte for
// byte as encoding/json does (how the SDK hands entities back), and counts
// their UTF-16 code units.
func TestAppendStringIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		s := randomText(rng, 40)
		want, _ := json.Marshal(s)
		got, units := appendString(nil, s)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
		if n := len(utf16.Encode([]rune(s))); units != n || utf16Len(s) != n {
			t.Fatalf("%q: %d and %d UTF-16 code units counted, want %d", s, units, utf16Len(s), n)
		}
	}
}

// respell writes s as a JSON string some other valid way: each character
// at random as it is (where JSON allows), as a \u escape (upper or lower
// case hex, surrogate pairs for runes outside the BMP) or short escape.
func respell(rng *rand.Rand, s string) []byte {
	out := []byte{'"'}
	for _, r := range s {
		switch c := rng.IntN(4); {
		case c == 0 && r >= 0x20 && r != '"' && r != '\\':
			out = append(out, string(r)...)
		case c == 1 && r == '/':
			out = append(out, `\/`...)
		default:
			for _, u := range utf16.Encode([]rune{r}) {
				format := `\u%04x`
				if rng.IntN(2) == 0 {
					format = `\u%04X`
				}
				out = fmt.Appendf(out, format, u)
			}
		}
	}
	return append(out, '"')
}

// TestUnquote: every spelling of a string decodes to it, and is called
// canonical exactly when it is what appendString writes.
func TestUnquote(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		s := randomText(rng, 30)
		spellings := [][]byte{jsonString(s), respell(rng, s)}
		for _, q := range spellings {
			got, err := unquote(q)
			if err != nil {
				t.Fatalf("unquote(%s): %v", q, err)
			}
			if got.text != s {
				t.Fatalf("unquote(%s) = %q, want %q", q, got.text, s)
			}
			if want := bytes.Equal(q, jsonString(s)); got.canonical != want {
				t.Fatalf("unquote(%s): canonical %v, want %v", q, got.canonical, want)
			}
			if got.units != len(utf16.Encode([]rune(s))) {
				t.Fatalf("unquote(%s): %d UTF-16 units", q, got.units)
			}
		}
	}
	for _, bad := range []string{`"`, `"\"`, `"\x"`, `"\u12"`, "\"a\nb\"", `abc`} {
		if _, err := unquote([]byte(bad)); err == nil {
			t.Errorf("unquote(%s) accepted it", bad)
		}
	}
}

// TestEachMember: the scanner finds members with any spacing and escaped
// names, and refuses what is not one JSON object.
func TestEachMember(t *testing.T) {
	doc := []byte(" { \"a\" : 1 , \"b\\u0041\":\"x\\\"}\", \"c\":{\"d\":[1,\"]\"]},\"e\":null}\n")
	var got []string
	err := eachMember(doc, func(name, value, member []byte) bool {
		got = append(got, string(name)+"="+string(value)+"|"+string(member))
		return true
	})
	want := []string{`a=1|"a" : 1`, `bA="x\"}"|"b\u0041":"x\"}"`, `c={"d":[1,"]"]}|"c":{"d":[1,"]"]}`, `e=null|"e":null`}
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("eachMember = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{``, `{`, `[]`, `{"a"}`, `{"a":1,}`, `{"a":1}x`, `{"a":"b}`, `{"a":1 "b":2}`, `{"a":}`} {
		if err := eachMember([]byte(bad), func(_, _, _ []byte) bool { return true }); err == nil {
			t.Errorf("eachMember(%s) accepted it", bad)
		}
	}
	if err := eachMember([]byte(` {} `), func(_, _, _ []byte) bool { t.Error("a member in {}"); return true }); err != nil {
		t.Errorf("eachMember({}): %v", err)
	}
}

// jsonString is s as a JSON string, as encoding/json writes it.
func jsonString(s string) []byte {
	b, _ := appendString(nil, s)
	return b
}
