package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server die with the test process, even when the
// test binary is killed or times out.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
