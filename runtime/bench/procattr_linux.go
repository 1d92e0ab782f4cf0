package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes a server the benchmark started die with it, even
// when the benchmark is killed before it could stop the server.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
