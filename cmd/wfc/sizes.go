package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wfc-lang/wfc/runtime"
)

// byteSize is a flag holding a number of bytes: 1048576, 512KiB, 64MiB,
// 1GiB (or KB, MB, GB: powers of 1000).
type byteSize int

func (b *byteSize) String() string { return sizeText(int(*b)) }

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSpace(s), 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > (1<<40)/int64(mult) {
		return errors.New("want a size of 1 byte to 1 TiB such as 65536, 512KiB or 64MiB")
	}
	*b = byteSize(n * int64(mult))
	return nil
}

// valueFlags are the bounds on the values of runs (docs/security.md,
// "Bounds on input"): a submitting process checks the inputs, a worker
// the outputs and the values a run stores. A workflow's max_input_bytes,
// max_output_bytes and max_state_bytes may lower them, not raise them.
type valueFlags struct {
	input, output, state *byteSize
}

func newByteSize(fs *flags, name string, def int, usage string) *byteSize {
	b := byteSize(def)
	fs.Var(&b, name, usage)
	return &b
}

// addInputBound adds --max-input-bytes (commands that submit runs).
func (v *valueFlags) addInputBound(fs *flags) {
	v.input = newByteSize(fs, "max-input-bytes", runtime.DefaultMaxValueBytes, "refuse a run whose inputs are more than `SIZE` as JSON")
}

// addWorkerBounds adds --max-output-bytes and --max-state-bytes
// (commands that run workers).
func (v *valueFlags) addWorkerBounds(fs *flags) {
	v.output = newByteSize(fs, "max-output-bytes", runtime.DefaultMaxValueBytes, "fail a node whose output is more than `SIZE` as JSON")
	v.state = newByteSize(fs, "max-state-bytes", runtime.DefaultMaxStateBytes, "fail a node whose value would take the values its run stores over `SIZE`")
}

func (v *valueFlags) engine(o *runtime.Options) {
	if v.input != nil {
		o.MaxInputBytes = int(*v.input)
	}
}

func (v *valueFlags) worker(o runtime.WorkerOptions) runtime.WorkerOptions {
	if v.output != nil {
		o.MaxOutputBytes = int(*v.output)
	}
	if v.state != nil {
		o.MaxStateBytes = int(*v.state)
	}
	return o
}

// sizeText writes a default size the way the flags take it.
func sizeText(n int) string {
	switch {
	case n <= 0:
		return strconv.Itoa(n)
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.Itoa(n)
}
