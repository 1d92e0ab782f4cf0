//go:build !unix

package lsp

func cpuNanos() int64 { return 0 }
