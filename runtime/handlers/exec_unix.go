//go:build unix

package handlers

import (
	"os"
	"os/exec"
	"syscall"
)

// startGroup makes cmd run in a process group of its own, so that what
// the program starts can be signalled with it.
func startGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group that cmd leads. It is
// os.ErrProcessDone when no process of the group is left.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return os.ErrProcessDone
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		if err == syscall.ESRCH {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}

// terminateGroup asks the program and everything in its group to stop
// (the context of the call is done).
func terminateGroup(cmd *exec.Cmd) error { return signalGroup(cmd, syscall.SIGTERM) }

// killGroup kills whatever is left of the program's group once the
// program has been waited for.
func killGroup(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGKILL) }
