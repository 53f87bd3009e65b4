//go:build race

package smoke

// raceEnabled reports whether the test binary has the race detector; the
// example is then built with it too, so its packages come from the same
// build cache and a data race in the example fails its smoke test.
const raceEnabled = true
