//go:build !unix

package handlers

import "os/exec"

// Without Unix process groups only the program itself is signalled: what
// it starts may outlive it.

func startGroup(cmd *exec.Cmd) {}

func terminateGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }

func killGroup(cmd *exec.Cmd) {}
