package tablestore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// checkOneLine fails unless err prints as one readable line (see
// azuritetest.CheckOneLine).
func checkOneLine(t *testing.T, what string, err error) {
	t.Helper()
	azuritetest.CheckOneLine(t, what, err, "tablestore:", "action ")
}

func TestErrorTextMissingDocument(t *testing.T) {
	s, _ := newTaskStore(t, nil)
	_, err := s.Get(t.Context(), "backlog/nope")
	checkOneLine(t, "Get missing", err)
	if !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Get missing = %v, want ErrNotFound", err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 404 {
		t.Errorf("Get missing = %v, want a 404 *azcore.ResponseError one errors.As away", err)
	}
	if !strings.Contains(err.Error(), `"backlog/nope"`) || !strings.Contains(err.Error(), "404") {
		t.Errorf("Get missing = %q, want the key and the status", err)
	}
}

func TestErrorTextMissingTable(t *testing.T) {
	s := etagstore.New[Task](tablestore.New(azuritetest.MissingTable(t), &tablestore.Options{Partition: "docs"}), nil)
	_, err := s.Get(t.Context(), "k")
	checkOneLine(t, "Get from a missing table", err)
	if !errors.Is(err, etagstore.ErrStorageNotFound) || errors.Is(err, etagstore.ErrNotFound) || !strings.Contains(err.Error(), "table does not exist") {
		t.Errorf("Get from a missing table = %v, want ErrStorageNotFound (not ErrNotFound) saying the table does not exist", err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Errorf("Get from a missing table = %v, want a *azcore.ResponseError one errors.As away", err)
	}
}

func TestErrorTextBatch(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	for _, k := range []string{"p/0", "p/1"} {
		if _, err := s.Create(ctx, k, Task{Title: k}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		build func(b *tablestore.Batch[Task])
		index string
		code  string
		want  error
	}{
		{"create existing", func(b *tablestore.Batch[Task]) {
			b.Upsert("p/5", Task{})
			b.Create("p/1", Task{Title: "dup"})
		}, "1", "EntityAlreadyExists", etagstore.ErrExists},
		{"delete missing", func(b *tablestore.Batch[Task]) {
			b.Upsert("p/8", Task{})
			b.Upsert("p/7", Task{})
			b.Delete("p/nope", etagstore.ETagAny)
		}, "2", "ResourceNotFound", etagstore.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tablestore.NewBatch(s)
			tc.build(b)
			_, err := b.Submit(ctx)
			checkOneLine(t, "batch "+tc.name, err)
			if !errors.Is(err, tc.want) {
				t.Errorf("Submit = %v, want %v", err, tc.want)
			}
			if msg := err.Error(); !strings.Contains(msg, "batch action "+tc.index+":") || !strings.Contains(msg, tc.code) || strings.Count(msg, "tablestore:") != 1 {
				t.Errorf("Submit = %q, want it to name action %s and %s, with one tablestore: prefix", msg, tc.index, tc.code)
			}
			var re *azcore.ResponseError
			if !errors.As(err, &re) {
				t.Errorf("Submit = %v, want a *azcore.ResponseError one errors.As away", err)
			}
		})
	}
}

func TestErrorTextTooLarge(t *testing.T) {
	s, _ := newTaskStore(t, nil)
	_, err := s.Upsert(t.Context(), "p/big", Task{Title: strings.Repeat("x", 70_000)})
	checkOneLine(t, "Upsert too large", err)
	if !errors.Is(err, etagstore.ErrTooLarge) {
		t.Errorf("Upsert too large = %v, want ErrTooLarge", err)
	}
}
