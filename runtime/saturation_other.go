//go:build !linux

package runtime

// machineCPU and processCPU measure nothing here: a worker goes by its
// Redis masters' CPU alone (saturation.go).
func machineCPU() (cpuTimes, bool) { return cpuTimes{}, false }
func processCPU() (float64, bool)  { return 0, false }
