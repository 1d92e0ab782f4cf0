package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// How wfc stops on SIGINT (^C) and SIGTERM (docs: README, "Stopping").
//
// The first signal cancels the command's context. The commands that hold
// something to give back — run and submit (their in-process workers
// release their messages and kill the process groups of exec handlers),
// worker, bench — stop through that context, within their grace. Every
// other command (check, build, fmt, lsp, the one-shot run commands) ends
// the process at once: it only reads and computes until it writes its
// output, and the compiler's passes do not watch a context, so waiting for
// them would mean waiting for the end of a compilation that may take
// seconds. A second signal ends any command at once.
//
// An interrupted command exits 128+N, as a shell reports a process a
// signal ended: 130 for SIGINT, 143 for SIGTERM. The worker (and the
// fake model server) is the exception: a signal is how it is meant to stop, and it exits 0 once it
// has.

// gracefulCommands stop through their context on the first signal.
var gracefulCommands = map[string]bool{"run": true, "submit": true, "worker": true, "bench": true, "fakemodel": true}

// fileWrite is held while a command replaces a file (build -o, fmt -w):
// a signal never ends the process between creating the temporary file and
// renaming it over the old one, which would leave the temporary file
// behind. (Writes to standard output are not held: a full pipe could
// block them forever.)
var fileWrite sync.Mutex

// signals watches SIGINT and SIGTERM for the process's Main.
type signals struct {
	cmd    string
	cancel context.CancelFunc
	stderr io.Writer
	ch     chan os.Signal
	got    atomic.Int32 // the number of the first signal, 0 before it
	exit   func(code int)
}

// watchSignals starts watching for command cmd; cancel cancels its
// context. Stop it with stop.
func watchSignals(cmd string, cancel context.CancelFunc, stderr io.Writer) *signals {
	s := &signals{cmd: cmd, cancel: cancel, stderr: stderr, ch: make(chan os.Signal, 2), exit: os.Exit}
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM)
	go s.loop()
	return s
}

func (s *signals) stop() { signal.Stop(s.ch) }

func (s *signals) loop() {
	for sig := range s.ch {
		n := int32(sig.(syscall.Signal))
		first := s.got.CompareAndSwap(0, n)
		if first && gracefulCommands[s.cmd] {
			s.cancel()
			continue
		}
		// A quick-exit command ends here, without cancelling its context
		// first: a cancelled read would race to print its own error.
		s.exitNow(sig, !first)
	}
}

// exitNow ends the process for sig, once no file is being replaced.
func (s *signals) exitNow(sig os.Signal, second bool) {
	fileWrite.Lock()
	name := "wfc"
	if s.cmd != "" {
		name += " " + s.cmd
	}
	if second {
		fmt.Fprintf(s.stderr, "%s: %s again: exiting at once\n", name, signalName(sig))
	} else {
		fmt.Fprintf(s.stderr, "%s: interrupted (%s)\n", name, signalName(sig))
	}
	s.exit(128 + int(sig.(syscall.Signal)))
}

// exitCode is the process's exit code once the command returned code:
// 128+N when signal N stopped it (except the worker's normal stop).
func (s *signals) exitCode(code int) int {
	n := s.got.Load()
	if n == 0 || s.cmd == "worker" || s.cmd == "fakemodel" {
		return code
	}
	return 128 + int(n)
}

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}
