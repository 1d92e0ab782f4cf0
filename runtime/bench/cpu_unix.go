//go:build unix

package bench

import "syscall"

// processCPU is the CPU time this process used so far (user + system), in
// seconds: the workers', the submitter's and the reference's Go side,
// which share the machine's cores with Redis.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
