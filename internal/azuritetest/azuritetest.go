// Package azuritetest connects tests to the Azurite emulator started by
// scripts/test. A missing Azurite fails the test: it is never skipped.
package azuritetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// EnvVar names the environment variable holding Azurite's connection string.
const EnvVar = "ETAGSTORE_AZURITE"

// ConnectionString returns Azurite's connection string or fails the test.
func ConnectionString(t testing.TB) string {
	t.Helper()
	cs := os.Getenv(EnvVar)
	if cs == "" {
		t.Fatalf("%s is not set: run the Azure tests through scripts/test, which starts Azurite", EnvVar)
	}
	return cs
}

// Name returns a fresh name usable for a table or a container.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// NewTable creates a fresh table and deletes it when the test ends.
func NewTable(t testing.TB) *aztables.Client {
	t.Helper()
	svc, err := aztables.NewServiceClientFromConnectionString(ConnectionString(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	name := Name("t")
	if _, err := svc.CreateTable(context.Background(), name, nil); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := svc.DeleteTable(ctx, name, nil); err != nil {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	return svc.NewClient(name)
}

// NewContainer creates a fresh blob container and deletes it when the test
// ends.
func NewContainer(t testing.TB) *container.Client {
	t.Helper()
	svc, err := azblob.NewClientFromConnectionString(ConnectionString(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(Name("c"))
	c := svc.ServiceClient().NewContainerClient(name)
	if _, err := c.Create(context.Background(), nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Delete(ctx, nil); err != nil {
			t.Errorf("delete container %s: %v", name, err)
		}
	})
	return c
}
