package docstore

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/docstore"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// article is the document a Store[T] program keeps; docArticle is the
// same document as a docstore program declares it, with one member more
// (Note) that article does not know.
type article struct {
	Name  string `json:"name"`
	Title string
	Views int
	Rank  int32
	Score float64
	Tags  []string
	At    time.Time
	Data  []byte
	Attrs map[string]string
}

type docArticle struct {
	Name             string `docstore:"name"`
	Title            string
	Views            int
	Rank             int32
	Score            float64
	Tags             []string
	At               time.Time
	Data             []byte
	Attrs            map[string]string
	Note             string
	DocstoreRevision any
}

var at = time.Date(2026, 11, 26, 8, 0, 0, 123400000, time.UTC)

func sample(name string) article {
	return article{Name: name, Title: "t", Views: 7, Rank: 3, Score: 2.5, Tags: []string{"a", "b"}, At: at, Data: []byte{0, 1, 2}, Attrs: map[string]string{"k": "v"}}
}

func asDoc(a article) *docArticle {
	return &docArticle{Name: a.Name, Title: a.Title, Views: a.Views, Rank: a.Rank, Score: a.Score, Tags: a.Tags, At: a.At, Data: a.Data, Attrs: a.Attrs}
}

// interop runs the four steps of both directions on one backend:
// docstore writes, the Store[T] reads and updates (keeping Note, which T
// does not know), docstore reads the update; the Store[T] creates,
// docstore reads, updates with mods and queries, the Store[T] reads that.
func interop(t *testing.T, coll *docstore.Collection, store *etagstore.Store[article]) {
	t.Helper()
	fromDocstore(t, coll, store)
	fromStore(t, coll, store)
	queryBoth(t, coll)
}

// fromDocstore: docstore → Store[T] → docstore.
func fromDocstore(t *testing.T, coll *docstore.Collection, store *etagstore.Store[article]) {
	t.Helper()
	ctx := t.Context()
	d := asDoc(sample("from-docstore"))
	d.Note = "kept"
	if err := coll.Put(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(ctx, "from-docstore")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample("from-docstore"), got.Value); diff != "" {
		t.Errorf("Store[T] read of a docstore document (-want +got):\n%s", diff)
	}
	if string(got.ETag) != d.DocstoreRevision {
		t.Errorf("revision %v, Store[T] ETag %s", d.DocstoreRevision, got.ETag)
	}
	if _, err := store.Update(ctx, "from-docstore", func(a *article) error { a.Views++; a.Tags = append(a.Tags, "c"); return nil }); err != nil {
		t.Fatal(err)
	}
	back := &docArticle{Name: "from-docstore"}
	if err := coll.Get(ctx, back); err != nil {
		t.Fatal(err)
	}
	want := asDoc(sample("from-docstore"))
	want.Views, want.Tags, want.Note, want.DocstoreRevision = 8, []string{"a", "b", "c"}, "kept", back.DocstoreRevision
	if diff := cmp.Diff(want, back); diff != "" {
		t.Errorf("docstore read after a Store[T] update (-want +got):\n%s", diff)
	}
}

// fromStore: Store[T] → docstore → Store[T].
func fromStore(t *testing.T, coll *docstore.Collection, store *etagstore.Store[article]) {
	t.Helper()
	ctx := t.Context()
	if _, err := store.Create(ctx, "from-store", sample("from-store")); err != nil {
		t.Fatal(err)
	}
	read := &docArticle{Name: "from-store"}
	if err := coll.Get(ctx, read); err != nil {
		t.Fatal(err)
	}
	want := asDoc(sample("from-store"))
	want.DocstoreRevision = read.DocstoreRevision
	if diff := cmp.Diff(want, read); diff != "" {
		t.Errorf("docstore read of a Store[T] document (-want +got):\n%s", diff)
	}
	if err := coll.Update(ctx, &docArticle{Name: "from-store"}, docstore.Mods{"Views": docstore.Increment(10), "Tags": []string{"z"}, "Rank": 4}); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(ctx, "from-store")
	if err != nil {
		t.Fatal(err)
	}
	wantA := sample("from-store")
	wantA.Views, wantA.Tags, wantA.Rank = 17, []string{"z"}, 4
	if diff := cmp.Diff(wantA, got.Value); diff != "" {
		t.Errorf("Store[T] read after a docstore Update (-want +got):\n%s", diff)
	}
}

// queryBoth queries both documents, with filters on members of each type.
func queryBoth(t *testing.T, coll *docstore.Collection) {
	t.Helper()
	ctx := t.Context()
	for _, q := range []*docstore.Query{
		coll.Query().Where("Views", ">=", 8),
		coll.Query().Where("Score", "=", 2.5).Where("Title", "=", "t"),
		coll.Query().Where("At", "=", at),
		coll.Query().Where("Rank", ">=", 3), // an Edm.Int32 (the Store[T]'s) and an Edm.Int64 (docstore's)
	} {
		n := 0
		it := q.Get(ctx)
		for {
			var a docArticle
			if err := it.Next(ctx, &a); err != nil {
				break
			}
			n++
		}
		it.Stop()
		if n != 2 {
			plan, _ := q.Plan()
			t.Errorf("query %s: %d documents, want 2", plan, n)
		}
	}
}

func TestInteropTable(t *testing.T) {
	client := azuritetest.NewTable(t)
	coll, err := OpenCollection(tablestore.New(client, &tablestore.Options{Partition: "p"}), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	interop(t, coll, tablestore.NewStore[article](client, &tablestore.Options{Partition: "p"}, nil))
}

func TestInteropBlob(t *testing.T) {
	c := azuritetest.NewContainer(t)
	coll, err := OpenCollection(blobstore.New(c, &blobstore.Options{Prefix: "docs/"}), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	interop(t, coll, blobstore.NewStore[article](c, &blobstore.Options{Prefix: "docs/"}, nil))
}
