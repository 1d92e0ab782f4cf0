package runtime

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestReplayScriptCost measures what the fast paths cost Redis per call,
// deterministically: it replays the begin and advance calls of a MONITOR
// trace of a bench run, in order, with the scripts of this tree, against
// the Redis server WFC_REPLAY_REDIS (flushed first). Under callgrind, with
// WFC_REPLAY_CG_PID the server's pid, it zeroes the server's counts before
// the begin calls and dumps them after, then again around the advance
// calls: evalShaCommand's inclusive count over the calls is the cost per
// call. It is a measuring tool, skipped unless WFC_REPLAY_TRACE names a
// trace:
//
//	redis-cli -p PORT monitor > trace & # then, on the same server:
//	WFC_BENCH_REDIS=redis://127.0.0.1:PORT/0 go test ./runtime/bench -run XXX -bench 'Runtime/cel-diamond/1w' -benchtime 200x
//	valgrind --tool=callgrind redis-server --port PORT2 --save "" --appendonly no &
//	WFC_REPLAY_TRACE=trace WFC_REPLAY_REDIS=redis://127.0.0.1:PORT2/0 WFC_REPLAY_CG_PID=<pid> \
//	  go test ./runtime -run TestReplayScriptCost -v
//
// The runs start with admission credits (as most of a bench's do), and each
// advance acknowledges a message its queue holds. WFC_REPLAY_REPEAT=k
// replays the trace's runs k times (run ids made anew, of the same length);
// WFC_REPLAY_NOACK replays the advance calls with the trace's message ids
// and no reads (for scripts that write nothing, to measure a floor).
func TestReplayScriptCost(t *testing.T) {
	trace, url := os.Getenv("WFC_REPLAY_TRACE"), os.Getenv("WFC_REPLAY_REDIS")
	if trace == "" || url == "" {
		t.Skip("WFC_REPLAY_TRACE and WFC_REPLAY_REDIS not set")
	}
	ctx := context.Background()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	sc, err := loadScripts()
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range sc {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(name, err)
		}
	}
	begins, advances := readTrace(t, trace)
	// WFC_REPLAY_REPEAT replays the trace's runs that many times, each
	// time with run ids of the same length made anew.
	if k, _ := strconv.Atoi(os.Getenv("WFC_REPLAY_REPEAT")); k > 1 {
		b0, a0 := begins, advances
		for r := 1; r < k; r++ {
			ren := func(calls [][]string, runArg int) [][]string {
				var out [][]string
				for _, a := range calls {
					nk, _ := strconv.Atoi(a[0])
					id := a[1+nk+runArg]
					nid := id[:len(id)-3] + fmt.Sprintf("%03d", r)
					b := make([]string, len(a))
					for i, x := range a {
						b[i] = strings.ReplaceAll(x, id, nid)
					}
					out = append(out, b)
				}
				return out
			}
			begins = append(begins, ren(b0, 0)...)
			advances = append(advances, ren(a0, 7)...)
		}
	}
	if len(begins) == 0 {
		t.Fatal("no begin calls in the trace")
	}
	// The graph key begin checks, the admission credits (the bench mostly
	// admits at once), and the consumer group of each queue stream.
	b0 := begins[0]
	nk, _ := strconv.Atoi(b0[0])
	keys := b0[1 : 1+nk]
	rdb.HSet(ctx, keys[2], "_", "{}")
	rdb.HSet(ctx, keys[4], "default", 1_000_000_000)
	for i := 5; i < len(keys); i++ {
		rdb.XGroupCreateMkStream(ctx, keys[i], Group, "$")
	}
	pid := os.Getenv("WFC_REPLAY_CG_PID")
	cg := func(arg string) {
		if pid == "" {
			return
		}
		if out, err := exec.Command("callgrind_control", arg, pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control %s: %v %s", arg, err, out)
		}
	}
	replies := map[string]int{}
	call := func(name string, a []string) {
		nk, _ := strconv.Atoi(a[0])
		args := make([]any, 0, len(a)-1-nk)
		for _, x := range a[1+nk:] {
			args = append(args, x)
		}
		res, err := sc[name].Run(ctx, rdb, a[1:1+nk], args...).Result()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		replies[fmt.Sprint(name, " ", res)]++
	}
	runs := map[string]bool{}
	cg("-z")
	for _, a := range begins {
		nk, _ := strconv.Atoi(a[0])
		runs[a[1+nk]] = true
		call("begin", a)
	}
	cg("-d")
	// Each advance acknowledges a message its queue holds: one read from
	// the group before each, as a worker's.
	n := 0
	for _, a := range advances {
		nk, _ := strconv.Atoi(a[0])
		if !runs[a[1+nk+7]] {
			continue
		}
		n++
		if os.Getenv("WFC_REPLAY_NOACK") != "" {
			// Scripts that write nothing: the trace's message ids.
			if n == 1 {
				cg("-z")
			}
			call("advance", a)
			continue
		}
		msgs, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "replay", Streams: []string{a[3], ">"}, Count: 1, Block: -1}).Result()
		if err != nil || len(msgs) == 0 || len(msgs[0].Messages) == 0 {
			t.Fatalf("no message to acknowledge after %d advances: %v; replies %v", n, err, replies)
		}
		a = slices.Clone(a)
		a[1+nk+6] = msgs[0].Messages[0].ID
		if n == 1 {
			cg("-z")
		}
		call("advance", a)
	}
	cg("-d")
	t.Logf("begin %d calls, advance %d calls; replies %v", len(begins), n, replies)
}

// readTrace returns the arguments (numkeys, keys, argv) of the begin and
// advance EVALSHA calls of a MONITOR trace, told apart by their keys:
// begin's third key is the graph, advance's the first queue stream.
func readTrace(t *testing.T, path string) (begins, advances [][]string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "] \"evalsha\" ")
		if i < 0 || strings.Contains(line[:i], "[0 lua") {
			continue
		}
		toks := splitQuoted(t, line[i+2:])
		if len(toks) < 4 {
			continue
		}
		a := toks[2:] // numkeys, keys..., argv...
		switch {
		case strings.Contains(a[3], ":graph:"):
			begins = append(begins, a)
		case len(a) > 4 && strings.HasSuffix(a[1], ":state") && strings.Contains(a[3], ":q:"):
			advances = append(advances, a)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return begins, advances
}

// splitQuoted splits MONITOR's quoted, escaped arguments.
func splitQuoted(t *testing.T, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		if s[i] != '"' {
			t.Fatalf("bad trace line at %q", s[i:])
		}
		j := i + 1
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' {
				j++
			}
		}
		u, err := strconv.Unquote(s[i : j+1])
		if err != nil {
			t.Fatalf("unquoting %q: %v", s[i:j+1], err)
		}
		out = append(out, u)
		i = j + 1
	}
	return out
}
