//go:build !race

package etagstore_test

const raceBuild = false
