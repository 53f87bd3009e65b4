//go:build race

package etagstore_test

// raceBuild: the race detector changes allocation counts (sync.Pool drops
// items at random, some values escape that would not).
const raceBuild = true
