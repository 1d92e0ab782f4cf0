//go:build linux

package compiler

import (
	"runtime"
	"syscall"
	"time"
)

// threadCPU runs f on one OS thread and returns the CPU time (user and
// system) that thread spent in it: the work f did. A loaded machine does
// not inflate it as it does wall-clock time (a thread waiting for a core
// is not charged), so a bound on it is a bound on work, not on the load.
// ok is false where it cannot be measured.
func threadCPU(f func()) (d time.Duration, ok bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadTime()
	if err != nil {
		f()
		return 0, false
	}
	f()
	after, err := threadTime()
	return after - before, err == nil
}

func threadTime() (time.Duration, error) {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
