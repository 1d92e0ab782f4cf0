//go:build unix

package lsp

import "syscall"

// cpuNanos returns the CPU time (user and system) of the process so far. On
// a loaded machine it measures work more steadily than wall time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
