package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Saturation. An adaptive worker adds slots to saturate the CPU or Redis,
// whichever comes first (adapt.go). Its limiter judges a step by the
// throughput it bought, but on a busy machine the throughput of one
// interval varies by ±20 % (measured: docs/performance.md, "fourth pass"),
// more than a step of a workflow whose gains come from bigger pipelines
// (about 3 % a step): the limiter then wanders, and as it prefers the
// smaller of two limits that perform alike, it drifts down with CPU and
// Redis still idle. So a worker also samples what saturates — the
// machine's CPU, its own process's share of GOMAXPROCS, the main thread
// of each Redis master it uses — and while none is saturated, a step that
// did not cost throughput is followed by another one up.

const (
	// satInterval is how often a worker samples saturation.
	satInterval = 500 * time.Millisecond
	// A Redis master whose main thread used this share of a core or more
	// is saturated.
	satRedis = 0.85
	// A machine with this share of its CPU idle or less is saturated.
	satIdle = 0.10
	// A worker process that used this share of its GOMAXPROCS or more is
	// saturated.
	satProc = 0.90
)

// A satGauge holds a worker's last saturation sample.
type satGauge struct {
	mu    sync.Mutex
	known bool   // something was measured
	sat   bool   // something measured was saturated
	why   string // what, for the limiter's log
}

// saturated reports whether the last sample found something saturated,
// and whether anything was measured at all.
func (g *satGauge) saturated() (sat, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sat, g.known
}

func (g *satGauge) set(sat, known bool, why string) {
	g.mu.Lock()
	g.sat, g.known, g.why = sat, known, why
	g.mu.Unlock()
}

// reason returns what the last sample found, for logs.
func (g *satGauge) reason() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.why
}

// A satReading is one sample of the cumulative CPU counters.
type satReading struct {
	at       time.Time
	redis    map[string]float64 // master address -> main thread CPU seconds
	redisErr error
	mach     cpuTimes
	machOK   bool
	proc     float64 // seconds
	procOK   bool
}

// cpuTimes are a machine's CPU times (any unit), from machineCPU.
type cpuTimes struct{ idle, total uint64 }

func readSaturation(ctx context.Context, st *store) satReading {
	r := satReading{at: time.Now()}
	r.redis, r.redisErr = st.mainThreadCPU(ctx)
	r.mach, r.machOK = machineCPU()
	r.proc, r.procOK = processCPU()
	return r
}

// judge compares two readings: whether anything measured was saturated
// between them, whether anything was measured, and what was saturated.
// gomaxprocs is the process's share of the machine. A remote Redis that
// does not report its CPU (INFO denied by an ACL, a server without the
// fields) makes the whole judgement unknown: the local CPU alone cannot
// tell whether Redis is saturated. The embedded server runs in this
// process, whose CPU and the machine's cover it.
func judge(prev, cur satReading, gomaxprocs int, embedded bool) (sat, known bool, why string) {
	dt := cur.at.Sub(prev.at).Seconds()
	if prev.at.IsZero() || dt <= 0 {
		return false, false, ""
	}
	if cur.redisErr != nil && !embedded {
		return false, false, "redis cpu unknown: " + cur.redisErr.Error()
	}
	var parts []string
	if cur.redisErr == nil && prev.redisErr == nil {
		for addr, c := range cur.redis {
			p, ok := prev.redis[addr]
			if !ok {
				continue
			}
			known = true
			if u := (c - p) / dt; u >= satRedis {
				sat = true
				parts = append(parts, fmt.Sprintf("redis %s %.2f", addr, u))
			}
		}
	}
	if cur.machOK && prev.machOK && cur.mach.total > prev.mach.total {
		known = true
		idle := float64(cur.mach.idle-prev.mach.idle) / float64(cur.mach.total-prev.mach.total)
		if idle <= satIdle {
			sat = true
			parts = append(parts, fmt.Sprintf("machine idle %.2f", idle))
		}
	}
	if cur.procOK && prev.procOK {
		known = true
		if u := (cur.proc - prev.proc) / dt / float64(max(gomaxprocs, 1)); u >= satProc {
			sat = true
			parts = append(parts, fmt.Sprintf("process %.2f", u))
		}
	}
	slices.Sort(parts) // masters in a stable order
	return sat, known, strings.Join(parts, ", ")
}

// satLoop samples saturation every satInterval until ctx ends.
func (w *Worker) satLoop(ctx context.Context) {
	embedded := w.eng.mini != nil
	var prev satReading
	t := time.NewTicker(satInterval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, satInterval)
		cur := readSaturation(rctx, w.st)
		cancel()
		w.sat.set(judge(prev, cur, goruntime.GOMAXPROCS(0), embedded))
		prev = cur
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var errNoCPU = errors.New("INFO cpu has no used_cpu fields")

// mainThreadCPU returns the CPU seconds the main thread of each Redis
// master used so far, by address (INFO cpu).
func (s *store) mainThreadCPU(ctx context.Context) (map[string]float64, error) {
	var mu sync.Mutex
	out := map[string]float64{}
	read := func(ctx context.Context, c *redis.Client) error {
		txt, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		v, ok := parseMainCPU(txt)
		if !ok {
			return errNoCPU
		}
		mu.Lock()
		out[c.Options().Addr] = v
		mu.Unlock()
		return nil
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		err = fmt.Errorf("runtime: no INFO for a %T", s.rdb)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseMainCPU reads the main thread's CPU seconds from INFO cpu's text
// (Redis 7: used_cpu_{sys,user}_main_thread; older servers report the
// whole process, used_cpu_{sys,user}).
func parseMainCPU(info string) (float64, bool) {
	f := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(k, "used_cpu_") {
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			f[k] = x
		}
	}
	sys, okS := f["used_cpu_sys_main_thread"]
	user, okU := f["used_cpu_user_main_thread"]
	if okS && okU {
		return sys + user, true
	}
	sys, okS = f["used_cpu_sys"]
	user, okU = f["used_cpu_user"]
	return sys + user, okS && okU
}

// parseProcStat reads the machine's CPU times from the first line of
// /proc/stat ("cpu user nice system idle iowait irq softirq steal guest
// guest_nice", in ticks): idle is idle and iowait, total the first eight
// (guest time is counted in user already).
func parseProcStat(text string) (cpuTimes, bool) {
	line, _, _ := strings.Cut(text, "\n")
	fs := strings.Fields(line)
	if len(fs) < 5 || fs[0] != "cpu" {
		return cpuTimes{}, false
	}
	var t cpuTimes
	for i, s := range fs[1:min(len(fs), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		t.total += v
		if i == 3 || i == 4 {
			t.idle += v
		}
	}
	return t, true
}
