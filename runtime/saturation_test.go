package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestParseMainCPU(t *testing.T) {
	for _, c := range []struct {
		name, info string
		want       float64
		ok         bool
	}{
		{"redis 7: the main thread", "# CPU\r\nused_cpu_sys:3.5\r\nused_cpu_user:6.5\r\nused_cpu_sys_children:0.0\r\nused_cpu_user_children:0.0\r\nused_cpu_sys_main_thread:2.25\r\nused_cpu_user_main_thread:5.5\r\n", 7.75, true},
		{"older: the process", "# CPU\nused_cpu_sys:1.5\nused_cpu_user:2.0\n", 3.5, true},
		{"one field missing", "# CPU\nused_cpu_sys:1.5\n", 0, false},
		{"not numbers", "used_cpu_sys:x\nused_cpu_user:y\n", 0, false},
		{"empty", "", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := parseMainCPU(c.info)
			if ok != c.ok || ok && got != c.want {
				t.Errorf("parseMainCPU = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestParseProcStat(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       cpuTimes
		ok         bool
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice
		{"linux", "cpu  100 5 50 800 20 0 10 15 7 0\ncpu0 50 2 25 400 10 0 5 7 3 0\n", cpuTimes{idle: 820, total: 1000}, true},
		{"old kernel, four fields", "cpu 10 0 10 80\n", cpuTimes{idle: 80, total: 100}, true},
		{"not the total line", "cpu0 1 2 3 4 5\n", cpuTimes{}, false},
		{"too short", "cpu 1 2\n", cpuTimes{}, false},
		{"garbage", "cpu a b c d e\n", cpuTimes{}, false},
		{"empty", "", cpuTimes{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := parseProcStat(c.text)
			if ok != c.ok || got != c.want {
				t.Errorf("parseProcStat = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// judge: each counter's share over the time between two readings, each
// against its threshold; a remote Redis that does not report its CPU
// makes the judgement unknown, the embedded one does not.
func TestJudgeSaturation(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	t1 := t0.Add(time.Second)
	at := func(tm time.Time, redisCPU map[string]float64, idle, total uint64, proc float64) satReading {
		return satReading{at: tm, redis: redisCPU, mach: cpuTimes{idle, total}, machOK: total > 0, proc: proc, procOK: proc > 0}
	}
	denied := errors.New("NOPERM this user has no permissions to run the 'info' command")
	for _, c := range []struct {
		name       string
		prev, cur  satReading
		embedded   bool
		sat, known bool
		why        string
	}{
		{name: "first reading", prev: satReading{}, cur: at(t1, map[string]float64{"a": 1}, 10, 100, 1), known: false},
		{name: "room everywhere",
			prev: at(t0, map[string]float64{"a": 10}, 100, 1000, 5), cur: at(t1, map[string]float64{"a": 10.6}, 150, 1200, 5.8), known: true},
		{name: "one master saturated",
			prev: at(t0, map[string]float64{"a": 10, "b": 3}, 100, 1000, 5), cur: at(t1, map[string]float64{"a": 10.2, "b": 3.9}, 150, 1200, 5.5),
			sat: true, known: true, why: "redis b 0.90"},
		{name: "machine busy",
			prev: at(t0, map[string]float64{"a": 10}, 100, 1000, 5), cur: at(t1, map[string]float64{"a": 10.5}, 105, 1200, 5.5),
			sat: true, known: true, why: "machine idle 0.03"},
		{name: "process at its GOMAXPROCS",
			prev: at(t0, map[string]float64{"a": 10}, 100, 1000, 5), cur: at(t1, map[string]float64{"a": 10.5}, 150, 1200, 6.9),
			sat: true, known: true, why: "process 0.95"},
		{name: "a master that just appeared is not judged",
			prev: at(t0, map[string]float64{"a": 10}, 0, 0, 0), cur: at(t1, map[string]float64{"a": 10.1, "c": 50}, 0, 0, 0), known: true},
		{name: "remote redis without INFO: unknown",
			prev: at(t0, nil, 100, 1000, 5), cur: satReading{at: t1, redisErr: denied, mach: cpuTimes{105, 1200}, machOK: true, proc: 6.9, procOK: true},
			known: false, why: "redis cpu unknown: " + denied.Error()},
		{name: "embedded redis without INFO: the process and the machine",
			prev: at(t0, nil, 100, 1000, 5), cur: satReading{at: t1, redisErr: denied, mach: cpuTimes{105, 1200}, machOK: true, proc: 5.5, procOK: true},
			embedded: true, sat: true, known: true, why: "machine idle 0.03"},
		{name: "nothing measurable",
			prev: satReading{at: t0, redisErr: denied}, cur: satReading{at: t1, redisErr: denied}, embedded: true, known: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sat, known, why := judge(c.prev, c.cur, 2, c.embedded)
			if sat != c.sat || known != c.known || why != c.why {
				t.Errorf("judge = %v, %v, %q; want %v, %v, %q", sat, known, why, c.sat, c.known, c.why)
			}
		})
	}
}

// The main thread's CPU of every master: one on a server, three on the
// cluster; none from the embedded server (miniredis has no INFO cpu).
func TestMainThreadCPU(t *testing.T) {
	for _, c := range []struct {
		b       backend
		masters int
	}{{backends[0], 0}, {backends[1], 1}, {clusterBackend, 3}} {
		t.Run(c.b.name, func(t *testing.T) {
			e := openEngine(t, c.b, Options{})
			got, err := e.st.mainThreadCPU(context.Background())
			if e.mini != nil {
				if err == nil {
					t.Fatalf("the embedded server reported its CPU: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.masters {
				t.Fatalf("%d masters' CPU (%v), want %d", len(got), got, c.masters)
			}
			for addr, v := range got {
				if v <= 0 {
					t.Errorf("master %s: %v s of CPU", addr, v)
				}
			}
		})
	}
}

// An adaptive worker samples saturation: after two samples it knows
// (on Linux: the machine and the process; on a real Redis: its CPU too),
// and a user whose ACL denies INFO leaves it unknown.
func TestWorkerSamplesSaturation(t *testing.T) {
	// known waits for the worker to know (up to 5 s), or checks that
	// it still does not after three samples.
	known := func(t *testing.T, wk *Worker, want bool) {
		t.Helper()
		if !want {
			time.Sleep(3 * satInterval)
			if _, k := wk.sat.saturated(); k {
				t.Fatalf("saturation known (%q), want unknown", wk.sat.reason())
			}
			return
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, k := wk.sat.saturated(); k {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("saturation unknown after 5 s (%q)", wk.sat.reason())
			}
		}
	}
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		o := fastWorker(v.reg)
		o.Concurrency = 0
		wk := v.e.StartWorkers(v.ctx, 0, o)
		if v.e.mini != nil && goruntime.GOOS != "linux" {
			known(t, wk, false)
			return
		}
		known(t, wk, true)
	})
	t.Run("INFO denied", func(t *testing.T) {
		opt, err := redis.ParseURL(sharedRedis(t))
		if err != nil {
			t.Fatal(err)
		}
		addr := opt.Addr
		admin := redis.NewClient(opt)
		defer admin.Close()
		user := fmt.Sprintf("wfc-noinfo-%d", time.Now().UnixNano())
		ctx := context.Background()
		if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
			t.Fatal(err)
		}
		defer admin.Do(ctx, "ACL", "DELUSER", user)
		u := fmt.Sprintf("redis://%s:pw@%s/0", user, addr)
		v := newEnv(t, backend{"noinfo", func(testing.TB) string { return u }})
		o := fastWorker(v.reg)
		o.Concurrency = 0
		wk := v.e.StartWorkers(v.ctx, 0, o)
		known(t, wk, false)
		if r := wk.sat.reason(); !strings.Contains(r, "redis cpu unknown") {
			t.Errorf("reason %q, want the Redis CPU unknown", r)
		}
	})
}
