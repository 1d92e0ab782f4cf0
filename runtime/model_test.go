package runtime

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// A randomized differential test: random DAGs with joins (all, any and settled),
// predicates, branches with and without else, on_error and failing nodes
// run on the runtime, and the node states must equal those of a small
// reference interpreter of docs/language.md §7.2–7.3. WFC_SEED=n replays a
// seed.

type mnode struct {
	id       string
	after    []int
	join     string
	when     int // input flag the predicate reads, -1 for none
	fails    bool
	onError  []int
	rules    []mrule // branch rules
	def      []int   // branch else targets
	branches bool
}

type mrule struct {
	flag    int
	targets []int
}

const mflags = 6

func genModel(r *rand.Rand) []*mnode {
	n := 6 + r.IntN(8)
	ns := make([]*mnode, n)
	for i := range ns {
		ns[i] = &mnode{id: fmt.Sprintf("n%d", i), join: ir.JoinAll, when: -1}
	}
	hasIn := make([]bool, n)
	edge := map[[2]int]bool{}
	for i := 1; i < n; i++ {
		for k := 0; k < 1+r.IntN(3); k++ {
			p := r.IntN(i)
			if ns[p].branches || edge[[2]int{p, i}] {
				continue
			}
			edge[[2]int{p, i}] = true
			ns[i].after = append(ns[i].after, p)
			hasIn[i] = true
		}
	}
	for i := 0; i < n-1; i++ {
		m := ns[i]
		switch x := r.IntN(10); {
		case x < 2 && !hasAfterDependents(ns, i):
			m.branches = true
			pick := func() []int {
				var ts []int
				for k := 0; k < 1+r.IntN(2); k++ {
					t := i + 1 + r.IntN(n-i-1)
					if !edge[[2]int{i, t}] {
						edge[[2]int{i, t}] = true
						ts = append(ts, t)
						hasIn[t] = true
					}
				}
				return ts
			}
			for k := 0; k < 1+r.IntN(2); k++ {
				if ts := pick(); len(ts) > 0 {
					m.rules = append(m.rules, mrule{r.IntN(mflags), ts})
				}
			}
			if r.IntN(2) == 0 {
				m.def = pick()
			}
			if len(m.rules) == 0 {
				m.branches = false
				m.def = nil
			}
		case x < 4:
			m.fails = true
			if r.IntN(3) > 0 {
				t := i + 1 + r.IntN(n-i-1)
				if !edge[[2]int{i, t}] {
					edge[[2]int{i, t}] = true
					m.onError = []int{t}
					hasIn[t] = true
				}
			}
		}
		if r.IntN(4) == 0 {
			m.when = r.IntN(mflags)
		}
		switch r.IntN(5) {
		case 0:
			m.join = ir.JoinAny
		case 1:
			m.join = ir.JoinSettled
		}
	}
	return ns
}

func hasAfterDependents(ns []*mnode, i int) bool {
	for _, m := range ns {
		for _, a := range m.after {
			if a == i {
				return true
			}
		}
	}
	return false
}

func (m *mnode) spec(ns []*mnode) *nodeSpec {
	var opts []nodeOpt
	for _, a := range m.after {
		opts = append(opts, after(ns[a].id))
	}
	ids := func(is []int) []string {
		var s []string
		for _, i := range is {
			s = append(s, ns[i].id)
		}
		return s
	}
	if m.join != ir.JoinAll {
		opts = append(opts, joinMode(m.join))
	}
	if m.when >= 0 {
		opts = append(opts, when(fmt.Sprintf("input.f%d", m.when)))
	}
	if len(m.onError) > 0 {
		opts = append(opts, onError(ids(m.onError)...))
	}
	if m.branches {
		var rs []ruleSpec
		for _, r := range m.rules {
			rs = append(rs, rule(fmt.Sprintf("input.f%d", r.flag), ids(r.targets)...))
		}
		opts = append(opts, branch(ids(m.def), rs...))
	}
	h := "noop"
	if m.fails {
		h = "perm"
	}
	return task(m.id, h, opts...)
}

// reference runs the model: node states and whether the run failed.
func reference(ns []*mnode, flags []bool) (map[string]string, bool) {
	in := map[int][]bool{} // arrivals per node
	expect := map[int]int{}
	type edge struct {
		to   int
		kind string
	}
	out := map[int][]edge{}
	for i, m := range ns {
		for _, a := range m.after {
			out[a] = append(out[a], edge{i, ir.EdgeAfter})
			expect[i]++
		}
		for _, r := range m.rules {
			for _, t := range r.targets {
				out[i] = append(out[i], edge{t, ir.EdgeBranch})
				expect[t]++
			}
		}
		for _, t := range m.def {
			out[i] = append(out[i], edge{t, ir.EdgeDefault})
			expect[t]++
		}
		for _, t := range m.onError {
			out[i] = append(out[i], edge{t, ir.EdgeError})
			expect[t]++
		}
	}
	states := map[string]string{}
	for i, m := range ns {
		// join all: every edge delivered a real token; any and settled:
		// one did (they differ in when, not whether).
		run := expect[i] == 0
		if m.join == ir.JoinAll && expect[i] > 0 {
			run = !slices.Contains(in[i], false)
		} else {
			run = run || slices.Contains(in[i], true)
		}
		real := map[edge]bool{}
		switch {
		case !run || m.when >= 0 && !flags[m.when]:
			states[m.id] = NodeSkipped
		case m.fails && len(m.onError) == 0:
			states[m.id] = NodeFailed
			return states, true
		case m.fails:
			states[m.id] = NodeFailed
			for _, t := range m.onError {
				real[edge{t, ir.EdgeError}] = true
			}
		default:
			states[m.id] = NodeCompleted
			if m.branches {
				chosen := false
				for _, r := range m.rules {
					if flags[r.flag] {
						for _, t := range r.targets {
							real[edge{t, ir.EdgeBranch}] = true
						}
						chosen = true
						break
					}
				}
				if !chosen {
					for _, t := range m.def {
						real[edge{t, ir.EdgeDefault}] = true
					}
				}
			} else {
				for _, e := range out[i] {
					if e.kind == ir.EdgeAfter {
						real[e] = true
					}
				}
			}
		}
		for _, e := range out[i] {
			in[e.to] = append(in[e.to], real[e])
		}
	}
	return states, false
}

// seedFromEnv returns $WFC_SEED, or a random seed, and logs it.
func seedFromEnv(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(rand.Int64())
	if s := os.Getenv("WFC_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (WFC_SEED=%d to replay)", seed, seed)
	return seed
}

func TestRandomDAGsAgainstModel(t *testing.T) {
	seed := seedFromEnv(t)
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 16 })
		r := rand.New(rand.NewPCG(seed, 7))
		var inputs []ir.Input
		for f := 0; f < mflags; f++ {
			inputs = append(inputs, input(fmt.Sprintf("f%d", f), ir.KindBool))
		}
		type job struct {
			run  string
			want map[string]string
			fail bool
			desc string
		}
		var jobs []job
		for k := 0; k < 12; k++ {
			ns := genModel(r)
			var specs []*nodeSpec
			for _, m := range ns {
				specs = append(specs, m.spec(ns))
			}
			w := build(t, wfSpec{name: fmt.Sprintf("random%d", k), inputs: inputs, nodes: specs})
			for c := 0; c < 2; c++ {
				flags := make([]bool, mflags)
				in := map[string]any{}
				for f := range flags {
					flags[f] = r.IntN(2) == 0
					in[fmt.Sprintf("f%d", f)] = flags[f]
				}
				want, fail := reference(ns, flags)
				jobs = append(jobs, job{v.submit(w, in), want, fail, fmt.Sprintf("workflow %d flags %v", k, flags)})
			}
		}
		for _, j := range jobs {
			st := v.wait(j.run)
			if j.fail {
				if st.State != RunFailed {
					t.Errorf("%s: run %s, want failed", j.desc, st.State)
				}
				continue
			}
			if st.State != RunCompleted {
				t.Errorf("%s: run %s (%s), want completed", j.desc, st.State, st.Error)
				continue
			}
			var diffs []string
			for id, want := range j.want {
				if got := nodeState(st, id); got != want {
					diffs = append(diffs, fmt.Sprintf("%s: %s, want %s", id, got, want))
				}
			}
			if len(diffs) > 0 {
				t.Errorf("%s:\n\t%s", j.desc, strings.Join(diffs, "\n\t"))
			}
		}
	})
}
