//go:build race

package main

// raceEnabled scales the time and memory bounds of the process limits
// suite: the race detector slows a process down and multiplies its memory.
const raceEnabled = true
