package runtime

import (
	"context"
	"errors"
	"regexp"
	"testing"
)

// A process whose shard count differs from the one that submitted a run
// says so when it looks the run up, instead of "never submitted" (issue
// #14 item 15); a run that is nowhere is still unknown, plainly.
func TestLimitShardMismatch(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Shards: 4})
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "cel", with("v", konst("1")))}})
		// No worker: the runs stay running. One whose shard of 4 is not 0,
		// the shard of every run for a process with one shard.
		var run string
		for run == "" || v.e.st.ks.shard(run) == 0 {
			run = v.submit(w, map[string]any{})
		}
		other, err := Open(context.Background(), Options{RedisURL: engineURL(v.e), Prefix: v.e.opts.Prefix, Shards: 1, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		want := regexp.MustCompile(`^unknown run ` + run + ` to this process: not in shard 0 of 1, where it looks, but in shard [1-3], where --shards [0-9, or]+ puts it \(submitted with another shard count: every process of a deployment must use the same --shards\)$`)
		ctx := context.Background()
		for name, op := range map[string]func() error{
			"status": func() error { _, err := other.Status(ctx, run); return err },
			"events": func() error { _, err := other.Events(ctx, run); return err },
			"cancel": func() error { return other.Cancel(ctx, run) },
			"retry":  func() error { return other.Retry(ctx, run) },
			"wait":   func() error { _, err := other.Wait(ctx, run); return err },
			"follow": func() error { _, err := other.Follow(ctx, run, func(Event) error { return nil }); return err },
		} {
			err := op()
			if !errors.Is(err, ErrUnknownRun) || !errors.Is(err, ErrShardMismatch) || !want.MatchString(err.Error()) {
				t.Errorf("%s: %v", name, err)
			} else if name == "status" && testing.Verbose() {
				t.Log(err)
			}
		}
		// The submitting process still sees its run.
		if st, err := v.e.Status(ctx, run); err != nil || st.State != RunRunning {
			t.Errorf("status with 4 shards: %v %v", st, err)
		}
		// A run that is in no shard is unknown, as before.
		_, err = other.Status(ctx, "01nosuchrun")
		if !errors.Is(err, ErrUnknownRun) || errors.Is(err, ErrShardMismatch) {
			t.Errorf("a run that does not exist: %v", err)
		}
	})
}
