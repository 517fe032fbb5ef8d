//go:build race

package audit

// raceEnabled: the race detector is on; sync.Pool then drops items at random, so allocation
// counts vary.
const raceEnabled = true
