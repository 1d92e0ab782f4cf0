package runtime

import (
	"os"
	"syscall"
)

// machineCPU returns the machine's CPU times from /proc/stat.
func machineCPU() (cpuTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	return parseProcStat(string(b))
}

// processCPU returns the CPU seconds this process used so far.
func processCPU() (float64, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9, true
}
