//go:build !unix

package format

func cpuNanos() int64 { return 0 }
