package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// TestLargePageOnTables: the wiki on tables (-table) stores a page of
// 200,000 characters (Body is split across properties), shows it in the
// editor whole, and saves an edit of it.
func TestLargePageOnTables(t *testing.T) {
	srv, pages := newWikiOn(t, tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "pages"}))
	var b strings.Builder
	for i := 0; b.Len() < 200000; i++ {
		fmt.Fprintf(&b, "line %d of a long page <&>\n", i)
	}
	text := b.String()[:200000]
	e := newEditor(t, srv)
	e.open("Big")
	if code, page := e.save("Big", text, nil); code != 200 {
		t.Fatalf("saving %d characters: %d\n%.500s", len(text), code, page)
	}
	d, err := pages.Get(t.Context(), "Big")
	if err != nil {
		t.Fatal(err)
	}
	if d.Value.Body != text {
		t.Fatalf("stored body is %d characters, want the %d saved", len(d.Value.Body), len(text))
	}
	shown := e.open("Big")
	if shown != text {
		t.Fatalf("the editor shows %d characters, want %d", len(shown), len(text))
	}
	edited := strings.Replace(shown, "line 5000 of", "line 5000 (edited) of", 1)
	if code, page := e.save("Big", edited, nil); code != 200 {
		t.Fatalf("saving the edit: %d\n%.500s", code, page)
	}
	if d, _ = pages.Get(t.Context(), "Big"); d.Value.Body != edited {
		t.Fatalf("stored body after the edit is %d characters, not the edit (%d)", len(d.Value.Body), len(edited))
	}
}
