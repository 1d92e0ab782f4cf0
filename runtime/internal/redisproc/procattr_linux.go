package redisproc

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server die with the process that started it,
// even when that process is killed or times out before it can stop it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
