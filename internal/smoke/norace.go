//go:build !race

package smoke

const raceEnabled = false
