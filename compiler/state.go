package compiler

import (
	"fmt"
	mathbits "math/bits"
	"strings"

	"github.com/google/cel-go/cel"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// state is one compilation: the passes read and write it in order.
type state struct {
	cfg   Config
	file  *source.File
	ast   *ast.File
	rp    *diag.Reporter
	info  *Info
	files map[string]*source.File

	wf        *ast.Workflow
	name      string
	settings  ir.Settings
	version   string
	desc      string
	handlers  map[string]*HandlerInfo
	usedH     map[string]bool
	inputs    []*InputInfo
	outputs   []*ast.Param
	finally   *finallyDef
	inFinally bool     // checking the finally block's expressions
	baseEnv   *cel.Env // the expression environment without `run` (types pass)
	nodes     []*node
	byID      map[string]*node
	// badNodeIDs: a node was dropped for its id (WF1008), so "no nodes"
	// would be a follow-on error.
	badNodeIDs bool

	// suggestWork is the work spent on "did you mean" hints so far
	// (suggestCost units); past maxSuggestWork no more are computed.
	suggestWork int
	// refSugg caches the suggestion for an unknown node reference
	// (resolve), which afterTypo reads again.
	refSugg map[*ast.Ident]string
	// handlerNames lists the handlers' names for suggestions (handlerRef).
	handlerNames []string

	// graph
	edges   []edge
	outE    [][]int // forward out-edges by node index (edge indexes)
	inE     [][]int
	order   []int  // topological order of node indexes (forward edges)
	cyclic  bool   // a cycle was reported: ancestor-based checks are skipped
	anc     []bits // anc[i] = forward ancestors of node i
	idom    []int  // immediate dominators (-1 for entries)
	maySkip []bool
	skel    *ir.Workflow // the analysed graph skeleton (graph pass)
	jf      *joinFacts   // what joins need and which outputs surely exist (joins.go), computed on first use

	// types
	prov    *provider
	env     *cel.Env
	checked map[*ast.Expr]*cel.Ast
	folded  map[*ast.Expr]*cel.Ast
	consts  map[*ast.Expr]any   // expressions that folded to a constant (JSON value)
	intLits map[*ast.Expr]int64 // int literals typed without cel-go (checkIntLit), for fold
	envs    map[*ast.Expr]*cel.Env
	// scopeEnvs caches environments with `output` or a for_each variable.
	scopeEnvs map[string]*cel.Env
	reads     []exprReads
	defaults  map[string][]byte // input defaults as JSON

	lexErrs      []int                   // offsets of lexical errors, sorted (lexErrorIn)
	inputUses    map[int]map[string]bool // node index -> inputs its expressions read
	outputInputs map[int]map[string]bool // workflow output index -> inputs read
	curOutput    int                     // index of the workflow output being checked

	ir       *ir.Workflow
	irFresh  bool // ir.Analyze ran on ir after every change to what it reads (nodes, edges, when, branch)
	required []string
}

type edge struct {
	from, to int
	kind     string
	ref      *ast.Ident // the reference that created it (for positions)
}

// A node is the compiler's view of one node declaration.
type node struct {
	id    string
	idx   int
	kind  string
	ident *ast.Ident
	decl  *ast.NodeDecl // nil when the declaration did not parse
	after []*ast.Ident
	join  string

	handler    string
	run        *ast.String
	runSet     []*ast.String // run ["a", "b"]: the handlers a dispatch chooses from
	dispatch   *ast.Expr     // dispatch EXPR: the name of the handler to run
	with       *ast.ParamBlock
	outDecl    *ast.TypeBlock
	when       *ast.Expr
	forEach    *ast.ForEach
	parallel   int
	tolerate   *ir.Tolerance
	retry      *ir.Retry
	timeoutMS  int64
	branch     *ast.Branch
	loop       *loopDef
	onError    []*ast.Ident // every on_error target, each once
	errRoutes  []errRoute   // the on_error lines, in order (a catch-all has no codes)
	compensate *compDef

	model                   string
	temperature             *float64
	prompt                  *ast.String
	routes                  []*ast.Ident
	dflt                    []*ast.Ident
	maxRoutes               int      // max_routes: how many routes the agent may pick (0: one)
	tools                   []string // tools: the tools the agent may call
	maxToolCalls, maxTokens int

	approvers     []string
	approversExpr *ast.Expr // approvers given by an expression that is not a list of string literals
	onTimeout     string
	onReject      []*ast.Ident
	// escalate_to and escalate_after: more approvers, who may decide
	// once the approval has waited that long.
	escalateTo      []string
	escalateExpr    *ast.Expr // as approversExpr
	escalateAfterMS int64

	uses  *ast.String
	child *Result

	description string
	outType     *ir.Type // type of id.output
}

// errRoute is one `on_error ["code", ...] => targets` line.
type errRoute struct {
	key     *ast.Ident
	codes   []*ast.String
	targets []*ast.Ident
}

// irErrorRoutes returns the IR's error_routes: none when the node's only
// on_error line has no codes (every failure takes it).
func (n *node) irErrorRoutes() []ir.ErrorRoute {
	if len(n.errRoutes) == 0 || len(n.errRoutes) == 1 && len(n.errRoutes[0].codes) == 0 {
		return nil
	}
	out := make([]ir.ErrorRoute, len(n.errRoutes))
	for i, r := range n.errRoutes {
		out[i].Targets = []string{}
		for _, t := range r.targets {
			out[i].Targets = append(out[i].Targets, t.Name)
		}
		for _, c := range r.codes {
			out[i].Codes = append(out[i].Codes, c.Value)
		}
	}
	return out
}

type loopDef struct {
	block     *ast.Block
	while     *ast.Expr
	max       int
	backTo    *ast.Ident
	exhausted []*ast.Ident
}

// finallyDef is the workflow's finally block.
type finallyDef struct {
	block   *ast.Block
	run     *ast.String
	handler string
	with    *ast.ParamBlock
	retry   *ir.Retry
}

type compDef struct {
	block   *ast.Block
	run     *ast.String
	handler string
	with    *ast.ParamBlock
}

func newState(cfg Config, f *source.File, file *ast.File) *state {
	s := &state{
		cfg:          cfg,
		file:         f,
		ast:          file,
		rp:           &diag.Reporter{File: f},
		files:        map[string]*source.File{f.Name: f},
		handlers:     Builtins(),
		usedH:        map[string]bool{},
		byID:         map[string]*node{},
		checked:      map[*ast.Expr]*cel.Ast{},
		folded:       map[*ast.Expr]*cel.Ast{},
		consts:       map[*ast.Expr]any{},
		intLits:      map[*ast.Expr]int64{},
		envs:         map[*ast.Expr]*cel.Env{},
		scopeEnvs:    map[string]*cel.Env{},
		defaults:     map[string][]byte{},
		inputUses:    map[int]map[string]bool{},
		outputInputs: map[int]map[string]bool{},
		info: &Info{
			Nodes:    map[string]*NodeInfo{},
			Inputs:   map[string]*InputInfo{},
			Handlers: map[string]*HandlerInfo{},
			Exprs:    map[*ast.Expr]*ExprInfo{},
		},
	}
	return s
}

func (s *state) errorf(code diag.Code, r source.Range, format string, args ...any) *diag.Diagnostic {
	return s.rp.Add(code, r, fmt.Sprintf(format, args...))
}

func (s *state) span(r source.Range) source.Span { return s.file.Span(r) }

// maxSuggestWork bounds the work of the "did you mean" hints of one file,
// in suggestWithin's units (a candidate looked at, plus the cells of each
// edit distance computed). Each unknown name is compared with every
// candidate, so a file with thousands of unknown names among thousands of
// nodes would otherwise take quadratic time (10,000 unknown `after` names
// took 12.7 s). An unknown name among 10,000 node ids of about 10
// characters costs about 10^6, so the bound allows about 100 hints there
// (far more among fewer nodes) and about 0.3 s of work; past it, unknown
// names are reported without a hint.
const maxSuggestWork = 100_000_000

// suggest is the package-level suggest within the file's budget of work
// (maxSuggestWork): once that is spent it returns "".
func (s *state) suggest(name string, candidates []string) string {
	if s.suggestWork >= maxSuggestWork {
		return ""
	}
	return s.suggestExcept(name, candidates, name)
}

// suggestExcept is s.suggest, never suggesting except (a node's own id for
// the references of its own items: it cannot depend on or route to
// itself).
func (s *state) suggestExcept(name string, candidates []string, except string) string {
	if s.suggestWork >= maxSuggestWork {
		return ""
	}
	sug, work := suggestCost(name, candidates, suggestLimit(name), except)
	s.suggestWork += work
	return sug
}

// suggest returns the closest candidate to name, or "" if none is close.
func suggest(name string, candidates []string) string {
	return suggestWithin(name, candidates, suggestLimit(name))
}

// suggestLimit is the largest edit distance worth suggesting for name.
func suggestLimit(name string) int {
	if len(name) == 1 {
		return 0 // any one-letter name is one edit from any other
	}
	return max(1, len(name)/3)
}

// suggestWithin is suggest with an explicit edit-distance limit.
func suggestWithin(name string, candidates []string, limit int) string {
	sug, _ := suggestCost(name, candidates, limit, name)
	return sug
}

// suggestCost is suggestWithin, also returning the work it did: one unit
// per candidate and one per cell of each edit distance it computed. It
// never suggests name itself, nor except.
func suggestCost(name string, candidates []string, limit int, except string) (string, int) {
	work := 0
	best, bestD := "", 1<<30
	for _, c := range candidates {
		work++
		// The distance is at least the difference in length: a candidate
		// further off than that cannot be suggested.
		if c == name || c == except || len(c) > len(name)+limit || len(name) > len(c)+limit {
			continue
		}
		work += len(name) * len(c)
		d := levenshtein(name, c)
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if bestD <= limit {
		return best, work
	}
	return suggestLoose(name, candidates, except), work + len(candidates)
}

// suggestLoose is suggestWithin's fallback when no candidate is within
// the edit-distance limit.
func suggestLoose(name string, candidates []string, except string) string {
	// A name that is a prefix of exactly one candidate, or has one as its
	// prefix (`customer` for `customer_id`), is worth suggesting too.
	pre := ""
	for _, c := range candidates {
		if c == except {
			continue
		}
		if min(len(c), len(name)) >= 4 && (strings.HasPrefix(c, name) || strings.HasPrefix(name, c)) {
			if pre != "" {
				pre = ""
				break
			}
			pre = c
		}
	}
	if pre != "" {
		return pre
	}
	// A case-only difference is always worth suggesting.
	for _, c := range candidates {
		if c != except && strings.EqualFold(c, name) {
			return c
		}
	}
	return ""
}

func levenshtein(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20 // long names: not worth the quadratic work
	}
	// Optimal string alignment distance: an adjacent transposition
	// ("fecth" for "fetch") counts as one edit, like in Levenshtein's
	// insertions, deletions and substitutions.
	var rows [3][65]int // on the stack: this runs for every candidate
	pprev, prev, cur := rows[0][:len(b)+1], rows[1][:len(b)+1], rows[2][:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pprev[j-2]+1)
			}
		}
		pprev, prev, cur = prev, cur, pprev
	}
	return prev[len(b)]
}

// didYouMean adds a hint and a fix replacing r with the suggestion.
func (s *state) didYouMean(d *diag.Diagnostic, r source.Range, name string, candidates []string) {
	s.hint(d, r, s.suggest(name, candidates))
}

// hint adds the hint and fix of didYouMean for the suggestion sug, if any.
func (s *state) hint(d *diag.Diagnostic, r source.Range, sug string) {
	if sug != "" {
		d.WithHint(fmt.Sprintf("did you mean `%s`?", sug))
		d.WithFix(fmt.Sprintf("Change to `%s`", sug), s.span(r), sug)
	}
}

// bits is a fixed-size bit set over node indexes.
type bits []uint64

func newBits(n int) bits      { return make(bits, (n+63)/64) }
func (b bits) set(i int)      { b[i/64] |= 1 << (uint(i) % 64) }
func (b bits) has(i int) bool { return i >= 0 && i/64 < len(b) && b[i/64]&(1<<(uint(i)%64)) != 0 }

// or adds o's indexes to b; o may be shorter (nil is empty).
func (b bits) or(o bits) {
	for i, w := range o {
		b[i] |= w
	}
}

func (b bits) clear(i int) { b[i/64] &^= 1 << (uint(i) % 64) }

// each calls f with every index set in b, in increasing order.
func (b bits) each(f func(int)) {
	for k, w := range b {
		for w != 0 {
			f(k*64 + mathbits.TrailingZeros64(w))
			w &= w - 1
		}
	}
}

// span returns the indexes of b's first and last non-zero words; lo > hi
// if b is empty.
func (b bits) span() (lo, hi int) {
	lo, hi = len(b), -1
	for k, w := range b {
		if w != 0 {
			lo = min(lo, k)
			hi = k
		}
	}
	return lo, hi
}
