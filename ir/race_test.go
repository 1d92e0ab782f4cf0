//go:build race

package ir

// raceEnabled skips the large tests, which the race detector slows down
// fiftyfold without finding anything the small ones would not.
const raceEnabled = true
