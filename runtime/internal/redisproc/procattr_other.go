//go:build !linux

package redisproc

import "os/exec"

func dieWithParent(*exec.Cmd) {}
