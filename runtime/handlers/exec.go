package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// maxOutput bounds what exec keeps of stdout and stderr.
const maxOutput = 1 << 20

// execWaitDelay bounds two waits: for the program to stop once the call's
// context is done (it has been sent SIGTERM; then it is killed), and for
// its stdout and stderr to close once it has exited (a child it left
// running may hold them open).
const execWaitDelay = 2 * time.Second

type execHandler struct{ allow bool }

type execConfig struct {
	Argv  []string          `json:"argv"`
	Env   map[string]string `json:"env"`
	Stdin string            `json:"stdin"`
	Dir   string            `json:"dir"`
	OK    []int             `json:"ok_exit_codes"`
}

// Run runs argv directly, without a shell, with an environment of PATH
// and the configured variables only. An exit status other than 0 and the
// ok_exit_codes fails with error code exec.N (retryable: a program may
// fail for a passing reason), its message ending with the last of stderr;
// a program that cannot start is a permanent error.
//
// The program runs in a process group of its own (on Unix). When ctx is
// done (the attempt's timeout, a cancelled run, the worker stopping) the
// whole group is sent SIGTERM, and the program is killed if it has not
// exited execWaitDelay later; once the program has exited, the call waits
// at most execWaitDelay more for its output to close, and then kills what
// is left of its group, so that nothing it started outlives the call.
func (h *execHandler) Run(ctx context.Context, req Request) (json.RawMessage, error) {
	if !h.allow {
		return nil, Permanentf("exec: running programs is disabled on this worker (start it with --allow-exec)")
	}
	var c execConfig
	if err := decodeConfig(req, &c); err != nil {
		return nil, err
	}
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, Permanentf("exec: argv is empty")
	}
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	startGroup(cmd)
	cmd.Cancel = func() error { return terminateGroup(cmd) }
	cmd.WaitDelay = execWaitDelay
	cmd.Dir = c.Dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range c.Env {
		if strings.ContainsAny(k, "=\x00") {
			return nil, Permanentf("exec: bad environment variable name %q", k)
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(c.Stdin)
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		killGroup(cmd)
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case errors.Is(err, exec.ErrWaitDelay):
			// The program exited 0 but left its output open: its output
			// is what it wrote until then.
		default:
			return nil, Permanentf("exec: %v", err)
		}
	}
	if code != 0 && !slices.Contains(c.OK, code) {
		tail := strings.TrimSpace(stderr.String())
		if len(tail) > 500 {
			tail = "…" + tail[len(tail)-500:]
		}
		msg := fmt.Sprintf("exec: %s exited with status %d", c.Argv[0], code)
		if tail != "" {
			msg += ": " + tail
		}
		return nil, &Error{Code: fmt.Sprintf("exec.%d", code), Message: msg, Retryable: true}
	}
	return json.Marshal(map[string]any{"exit_code": code, "stdout": stdout.String(), "stderr": stderr.String()})
}

type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
