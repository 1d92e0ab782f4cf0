package ir

import (
	"encoding/json"
	"strings"
)

// Version is the IR format version written to ir_version. It changes only on
// an incompatible change to the format, so a runtime can refuse documents it
// does not understand instead of misreading them.
const Version = "1"

// Node types.
const (
	NodeTask  = "task"  // runs a handler
	NodeAgent = "agent" // asks a model, optionally to pick a route
	NodeHuman = "human" // waits for an approval decision
	NodeFlow  = "flow"  // runs a child workflow
)

// Edge kinds. Every kind except EdgeLoop is a forward edge; forward edges
// form a DAG, and loop edges are the only way back.
const (
	EdgeAfter     = "after"     // from `after x`
	EdgeBranch    = "branch"    // to a target of a branch rule
	EdgeDefault   = "default"   // to a branch default or an agent default
	EdgeRoute     = "route"     // to an agent route
	EdgeLoop      = "loop"      // from a loop node back to its back_to target
	EdgeExhausted = "exhausted" // to the path taken when a loop runs out of iterations
	EdgeError     = "error"     // to an on_error target
	EdgeReject    = "reject"    // to a human node's on_reject target
)

// Join modes.
const (
	JoinAll     = "all"     // run when every incoming edge delivered a real token; skip at the first skip
	JoinAny     = "any"     // run on the first real token
	JoinSettled = "settled" // wait for a token on every incoming edge; run if any is real (BPMN's inclusive join)
	JoinFirst   = "first"   // run on the first real token, as any, and cancel the pending work of JoinInfo.Cancels
)

// Retry backoff kinds.
const (
	BackoffFixed       = "fixed"
	BackoffLinear      = "linear"
	BackoffExponential = "exponential"
)

// What a human node does when its approval times out.
const (
	TimeoutApprove = "approve"
	TimeoutReject  = "reject"
	TimeoutFail    = "fail"
)

// Type kinds.
const (
	KindString   = "string"
	KindInt      = "int"
	KindNumber   = "number"
	KindBool     = "bool"
	KindDuration = "duration"
	KindAny      = "any"
	KindList     = "list"
	KindMap      = "map"
	KindObject   = "object"
	KindNull     = "null"
	// KindSecret is the type of a secret input only (never nested, never
	// a field or handler type): its value in the run is the secret's name
	// (ValidSecretName); a worker resolves the name to the value when an
	// expression reads the input, as a string (docs/language.md §4.4).
	KindSecret = "secret"
)

// ValidSecretName reports whether s may name a secret: [A-Za-z_][A-Za-z0-9_]*,
// at most 128 bytes, so that it is also the suffix of an environment
// variable (WFC_SECRET_<name>).
func ValidSecretName(s string) bool { return len(s) <= 128 && isIdent(s) }

// A Workflow represents one compiled workflow: the IR document.
//
// Nodes and Edges are the source of truth. The fields marked derived are
// computed by Analyze; values decoded from a document are ignored and
// recomputed. Fields tagged hash:"-" are left out of Canonical and Hash,
// because they describe where the workflow came from, not what it does.
type Workflow struct {
	IRVersion   string    `json:"ir_version"`
	Name        string    `json:"name"`
	Version     string    `json:"version,omitempty"` // the workflow's own version string
	Description string    `json:"description,omitempty"`
	Source      string    `json:"source,omitempty" hash:"-"` // .wf path as given to the compiler
	Settings    Settings  `json:"settings"`
	Inputs      []Input   `json:"inputs"`
	Outputs     []Output  `json:"outputs"`
	Handlers    []Handler `json:"handlers"` // handlers the nodes use, sorted by name
	Nodes       []Node    `json:"nodes"`    // in source order
	Edges       []Edge    `json:"edges"`    // every edge of the graph
	// Finally runs once after the run ends — completed, failed (after its
	// compensations) or cancelled — with `run` bound to the run's metadata.
	Finally *Finally `json:"finally,omitempty"`
	// Goals: the nodes a goal build (`wfc build --goal`) was made for. A run
	// of such a workflow succeeds only if every goal node completed; else it
	// fails naming the goal and why it did not run.
	Goals []string `json:"goals,omitempty"`

	// Derived by Analyze.
	Entries   []string `json:"entries" hash:"-"`   // nodes with no incoming forward edge, in Order
	Terminals []string `json:"terminals" hash:"-"` // nodes with no outgoing forward edge, in Order
	Order     []string `json:"order" hash:"-"`     // topological order of the forward edges, ties by node index

	// Children are the workflows that flow nodes run, compiled and embedded
	// at build time so that a run never reads a .wf file: every workflow
	// a flow node of this document references (at any depth), once each,
	// sorted by Hash. Only the root document has children; a child's flow
	// nodes reference the root's. Hash leaves them out: a flow node's
	// Flow.Hash already covers its child's content (and, through the
	// child's own flow nodes, its descendants'), so a child extracted with
	// its descendants hashes to the hash its parent references.
	Children []Child `json:"children,omitempty" hash:"-"`
}

// A Child is one embedded child workflow: Hash is Hash(&Workflow), which
// the flow nodes running it give as Flow.Hash.
type Child struct {
	Hash     string   `json:"hash"`
	Workflow Workflow `json:"workflow"`
}

// MaxFlowDepth bounds the nesting of flows: the longest chain of flow
// nodes from the root, through children, to a child without flow nodes
// (the compiler's limit on nested flows).
const MaxFlowDepth = 16

// Settings holds the workflow-wide limits. Zero means "not set"; the
// runtime applies its own defaults.
type Settings struct {
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
	MaxHops    int   `json:"max_hops,omitempty"`
	MaxFanout  int   `json:"max_fanout,omitempty"`
	// Value bounds (bytes, as JSON): a workflow may lower the submitter's
	// or worker's bound, never raise it (the runtime takes the smaller).
	MaxInputBytes  int `json:"max_input_bytes,omitempty"`
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	MaxStateBytes  int `json:"max_state_bytes,omitempty"`
}

// An Input represents one declared workflow input. Required is true exactly
// when Default is absent.
type Input struct {
	Name     string          `json:"name"`
	Type     Type            `json:"type"`
	Default  json.RawMessage `json:"default,omitempty"`
	Required bool            `json:"required,omitempty"`
	Loc      *Loc            `json:"loc,omitempty" hash:"-"`
}

// An Output represents one field of a run's result.
type Output struct {
	Name string `json:"name"`
	Expr Expr   `json:"expr"`
	Loc  *Loc   `json:"loc,omitempty" hash:"-"`
}

// A Handler represents a handler declaration: the config a task passes to it
// and the output it returns. Builtin handlers ship with the runtime.
type Handler struct {
	Name    string `json:"name"`
	Builtin bool   `json:"builtin,omitempty"`
	Config  Type   `json:"config"`
	Output  Type   `json:"output"`
	Loc     *Loc   `json:"loc,omitempty" hash:"-"`
}

// A Type represents a checked type. Elem is set for list and map; Fields
// only for object, in declaration order.
type Type struct {
	Kind   string  `json:"kind"`
	Elem   *Type   `json:"elem,omitempty"`
	Fields []Field `json:"fields,omitempty"`
}

// A Field represents one field of an object type.
type Field struct {
	Name     string `json:"name"`
	Type     Type   `json:"type"`
	Optional bool   `json:"optional,omitempty"`
}

// A Loc represents a source range in a .wf file, so that runtime errors can
// point back at the source. Lines and columns are 1-based; columns count
// bytes; the end is exclusive.
type Loc struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	EndLine int    `json:"end_line"`
	EndCol  int    `json:"end_col"`
}

// An Expr represents a CEL expression and, when the compiler checked it,
// its result type.
type Expr struct {
	CEL  string `json:"cel"`
	Type *Type  `json:"type,omitempty"`
	Loc  *Loc   `json:"loc,omitempty" hash:"-"`
}

// A Value represents a configured value: exactly one of a JSON constant, an
// expression or a string template.
type Value struct {
	Const    json.RawMessage `json:"const,omitempty"`
	Expr     *Expr           `json:"expr,omitempty"`
	Template []TemplatePart  `json:"template,omitempty"`
}

// A TemplatePart represents a piece of a string template: exactly one of
// literal text or an expression whose value is spliced in.
type TemplatePart struct {
	Text string `json:"text,omitempty"`
	Expr *Expr  `json:"expr,omitempty"`
}

// A Param represents one field of a `with` block, in source order.
type Param struct {
	Name  string `json:"name"`
	Value Value  `json:"value"`
}

// A Node represents one step of the workflow. Type says which of Handler,
// Agent, Human and Flow is set; the other options may be combined freely.
type Node struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Handler string `json:"handler,omitempty"` // task only
	// Dispatch, on a task instead of Handler, chooses the handler at run
	// time: Expr (a string) names one of Handlers.
	Dispatch   *Dispatch `json:"dispatch,omitempty"`
	With       []Param   `json:"with,omitempty"`
	OutputType *Type     `json:"output_type,omitempty"`
	Join       string    `json:"join"`           // JoinAll, JoinAny, JoinSettled or JoinFirst
	When       *Expr     `json:"when,omitempty"` // false => the node is skipped
	ForEach    *ForEach  `json:"for_each,omitempty"`
	Retry      *Retry    `json:"retry,omitempty"`
	TimeoutMS  int64     `json:"timeout_ms,omitempty"`
	Branch     *Branch   `json:"branch,omitempty"`
	Loop       *Loop     `json:"loop,omitempty"`
	OnError    []string  `json:"on_error,omitempty"` // every on_error target, each once
	// ErrorRoutes route a failure by its error code (on_error "code" =>
	// targets): the first route one of whose codes matches takes it, else
	// the route without codes (the catch-all, last). Absent: every failure
	// goes to all of OnError. A failure no route takes fails the run.
	ErrorRoutes []ErrorRoute `json:"error_routes,omitempty"`
	Compensate  *Compensate  `json:"compensate,omitempty"`
	Agent       *Agent       `json:"agent,omitempty"`
	Human       *Human       `json:"human,omitempty"`
	Flow        *Flow        `json:"flow,omitempty"`
	Loc         *Loc         `json:"loc,omitempty" hash:"-"`

	// Derived by Analyze.
	Dependencies []string  `json:"dependencies" hash:"-"` // sources of incoming forward edges, in Order
	Dependents   []string  `json:"dependents" hash:"-"`   // targets of outgoing forward edges, in Order
	JoinInfo     *JoinInfo `json:"join_info,omitempty" hash:"-"`
	MaySkip      bool      `json:"may_skip,omitempty" hash:"-"`
	Entry        bool      `json:"entry,omitempty" hash:"-"`
	Terminal     bool      `json:"terminal,omitempty" hash:"-"`
	LoopBody     []string  `json:"loop_body,omitempty" hash:"-"` // back_to .. this node, in Order
}

// A ForEach represents running a node once per item of a list.
type ForEach struct {
	Var      string `json:"var"`
	Index    string `json:"index,omitempty"` // the item's index variable, if any
	Items    Expr   `json:"items"`
	Parallel int    `json:"parallel,omitempty"` // 0 = unlimited
	// Tolerate, when set, lets items fail: the node fails only when more
	// than Count items (or Percent per cent of them, rounded down) fail;
	// its output is then a list of {index, output} or {index, error}.
	Tolerate *Tolerance `json:"tolerate,omitempty"`
}

// A Tolerance bounds the failed items of a for_each: Count items, or
// Percent per cent of the items (0 to 100), whichever is set.
type Tolerance struct {
	Count   int `json:"count,omitempty"`
	Percent int `json:"percent,omitempty"`
}

// Limit is how many of n items may fail.
func (t *Tolerance) Limit(n int) int {
	if t.Percent > 0 {
		return n * t.Percent / 100
	}
	return t.Count
}

// A Retry represents a node's retry policy.
type Retry struct {
	Attempts   int    `json:"attempts"` // total attempts, including the first
	Backoff    string `json:"backoff"`
	DelayMS    int64  `json:"delay_ms,omitempty"`
	MaxDelayMS int64  `json:"max_delay_ms,omitempty"`
	// On, when set, retries only errors whose code matches one of these;
	// Except never retries those. At most one of them is set. A code
	// ending in * matches every code with that prefix.
	On     []string `json:"on,omitempty"`
	Except []string `json:"except,omitempty"`
}

// A Dispatch chooses a task's handler at run time from a closed set
// (Conductor's dynamic task): Expr evaluates to the name of one of
// Handlers, which accept the same config and give the same output.
type Dispatch struct {
	Expr     Expr     `json:"expr"`
	Handlers []string `json:"handlers"`
}

// A Finally is the workflow's exit handler (Argo's onExit): a handler run
// once when the run has ended.
type Finally struct {
	Handler string  `json:"handler"`
	With    []Param `json:"with,omitempty"`
	Retry   *Retry  `json:"retry,omitempty"`
	Loc     *Loc    `json:"loc,omitempty" hash:"-"`
}

// An ErrorRoute sends a failure whose error code matches one of Codes (or
// any failure, when Codes is empty) to Targets.
type ErrorRoute struct {
	Codes   []string `json:"codes,omitempty"`
	Targets []string `json:"targets"`
}

// MatchCode reports whether error code c matches pattern p: equal, or p
// ends in * and c starts with the rest.
func MatchCode(p, c string) bool {
	if pre, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(c, pre)
	}
	return p == c
}

// Route returns the targets a failure with error code c goes to, and
// whether a route takes it (docs/language.md §7.8).
func (n *Node) Route(c string) ([]string, bool) {
	if len(n.ErrorRoutes) == 0 {
		return n.OnError, len(n.OnError) > 0
	}
	for _, r := range n.ErrorRoutes {
		if len(r.Codes) == 0 {
			return r.Targets, true
		}
		for _, p := range r.Codes {
			if MatchCode(p, c) {
				return r.Targets, true
			}
		}
	}
	return nil, false
}

// A Branch represents conditional routing on a node's output. The runtime
// sends real tokens along the branch edges of the first rule that matches
// (or along the default edges) and skip tokens along the others.
type Branch struct {
	Rules   []Rule   `json:"rules"`
	Default []string `json:"default,omitempty"`
}

// A Rule represents one `when cond => targets` line of a branch.
type Rule struct {
	When    Expr     `json:"when"`
	Targets []string `json:"targets"`
}

// A Loop represents re-running the region from BackTo to the loop node while
// While holds, at most Max times; when the limit is hit the Exhausted
// targets run instead of the plain dependents.
type Loop struct {
	While     Expr     `json:"while"`
	Max       int      `json:"max"`
	BackTo    string   `json:"back_to"`
	Exhausted []string `json:"exhausted,omitempty"`
}

// A Compensate represents the handler run to undo a completed node when the
// run later fails (saga).
type Compensate struct {
	Handler string  `json:"handler"`
	With    []Param `json:"with,omitempty"`
}

// An Agent represents a model call. With Routes, the model must pick among
// them; anything else takes Default.
type Agent struct {
	Model       string   `json:"model"`
	Temperature *float64 `json:"temperature,omitempty"`
	Prompt      Value    `json:"prompt"`
	Routes      []string `json:"routes,omitempty"`
	Default     []string `json:"default,omitempty"`
	// MaxRoutes is how many of Routes the model may pick together, each
	// getting a real token (0 or 1: exactly one).
	MaxRoutes int `json:"max_routes,omitempty"`
	// Tools names the tools the model may call (the worker must offer
	// them); MaxToolCalls and MaxTokens bound the conversation (0: the
	// worker's defaults).
	Tools        []string `json:"tools,omitempty"`
	MaxToolCalls int      `json:"max_tool_calls,omitempty"`
	MaxTokens    int      `json:"max_tokens,omitempty"`
}

// A Human represents an approval step.
type Human struct {
	Approvers []string `json:"approvers,omitempty"`
	// ApproversExpr, instead of Approvers, computes them when the node runs
	// (a list(string), from inputs and outputs).
	ApproversExpr *Expr    `json:"approvers_expr,omitempty"`
	TimeoutMS     int64    `json:"timeout_ms,omitempty"`
	OnTimeout     string   `json:"on_timeout,omitempty"` // TimeoutApprove, TimeoutReject or TimeoutFail; empty means fail
	OnReject      []string `json:"on_reject,omitempty"`
	Prompt        *Value   `json:"prompt,omitempty"` // the message shown to approvers
	// EscalateTo (or EscalateToExpr, computed when the node runs, like
	// ApproversExpr) may decide too once EscalateAfterMS has passed since
	// the approval was created; the approvers keep their right. The three
	// go together, and EscalateAfterMS is below TimeoutMS when both are
	// set (an escalation after the timeout could never apply).
	EscalateTo      []string `json:"escalate_to,omitempty"`
	EscalateToExpr  *Expr    `json:"escalate_to_expr,omitempty"`
	EscalateAfterMS int64    `json:"escalate_after_ms,omitempty"`
}

// A Flow represents running a child workflow: the child is the embedded
// Child (of the root document) whose Hash is Hash. Uses is the path the
// source gave, for messages only; like Source it does not change the hash.
type Flow struct {
	Uses string  `json:"uses" hash:"-"`
	Hash string  `json:"hash"`
	With []Param `json:"with,omitempty"`
}

// A JoinInfo represents how a node with more than one incoming forward edge
// joins its tokens. Expect counts edges, not distinct sources: an arrival is
// identified by its (from, kind) pair.
type JoinInfo struct {
	Mode        string    `json:"mode"`
	Expect      int       `json:"expect"`
	Incoming    []EdgeRef `json:"incoming"`
	Conditional int       `json:"conditional"` // how many incoming edges may deliver a skip token
	// Covered: every incoming edge may deliver a skip, yet the node always
	// gets a real token: they cover every outcome of a branch's rules and
	// else, or of a source such as one with on_error (docs/ir.md).
	Covered bool `json:"covered,omitempty"`
	// Cancels, for a join first: the nodes whose every forward path leads
	// to this node and nowhere else (its exclusive ancestors), in Order,
	// goal nodes and their ancestors excepted. When the join fires their
	// pending work is useless, and the runtime cancels it in the same step.
	Cancels []string `json:"cancels,omitempty"`
}

// An EdgeRef represents one incoming edge of a join.
type EdgeRef struct {
	From        string `json:"from"`
	Kind        string `json:"kind"`
	Conditional bool   `json:"conditional,omitempty"`
}

// An Edge represents one edge of the graph.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
}

// Forward reports whether edges of the given kind point forward, that is,
// belong to the DAG that orders the nodes. Only loop edges point backward.
func Forward(kind string) bool { return kind != EdgeLoop }

// Node returns the first node with the given id, or nil.
// It scans the nodes; callers doing many lookups should use Index.
func (w *Workflow) Node(id string) *Node {
	if w == nil {
		return nil
	}
	for i := range w.Nodes {
		if w.Nodes[i].ID == id {
			return &w.Nodes[i]
		}
	}
	return nil
}

// Index maps each node id to its index in w.Nodes. If ids repeat (which
// Validate reports), the first wins.
func Index(w *Workflow) map[string]int {
	if w == nil {
		return map[string]int{}
	}
	m := make(map[string]int, len(w.Nodes))
	for i := range w.Nodes {
		if _, dup := m[w.Nodes[i].ID]; !dup {
			m[w.Nodes[i].ID] = i
		}
	}
	return m
}

// String spells the type the way a .wf file writes it: `list<int>`,
// `map<string>`, `{ id: string  note?: string }`; a nil type is `any`.
// The compiler's messages, the CLI, the runtime and the language server all
// use it.
func (t *Type) String() string {
	if t == nil {
		return KindAny
	}
	switch t.Kind {
	case KindList, KindMap:
		return t.Kind + "<" + t.Elem.String() + ">"
	case KindObject:
		if len(t.Fields) == 0 {
			return "{}"
		}
		var b strings.Builder
		b.WriteString("{ ")
		for i := range t.Fields {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(t.Fields[i].String())
		}
		b.WriteString(" }")
		return b.String()
	}
	return t.Kind
}

// String spells the field as in a .wf type block: `name?: type`.
func (f Field) String() string {
	opt := ""
	if f.Optional {
		opt = "?"
	}
	return f.Name + opt + ": " + f.Type.String()
}
