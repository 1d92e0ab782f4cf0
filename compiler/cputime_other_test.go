//go:build !unix

package compiler

func cpuNanos() int64 { return 0 }
