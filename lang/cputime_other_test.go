//go:build !unix

package lang

func cpuNanos() int64 { return 0 }
