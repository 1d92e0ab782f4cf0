package diag

// A Code identifies a kind of diagnostic. Codes are stable: once published a
// code never changes meaning; retired codes are not reused. docs/language.md
// lists every code (a test keeps that list and this registry equal).
type Code string

// CodeInfo describes a code.
type CodeInfo struct {
	Code     Code
	Severity Severity
	Title    string
}

// Severity returns the default severity of c.
func (c Code) Severity() Severity {
	if i, ok := registry[c]; ok {
		return i.Severity
	}
	return Error
}

// Title returns the one-line description of c.
func (c Code) Title() string { return registry[c].Title }

// Known reports whether c is registered.
func (c Code) Known() bool { _, ok := registry[c]; return ok }

// Codes returns every registered code in order.
func Codes() []CodeInfo {
	out := make([]CodeInfo, 0, len(all))
	for _, c := range all {
		out = append(out, registry[c.Code])
	}
	return out
}

// Lexical and syntax errors: WF0xxx.
const (
	// SyntaxError: a token that the grammar does not allow here, e.g. `task { }`
	// (missing node id). Fix: follow the grammar in docs/language.md.
	SyntaxError Code = "WF0001"
	// BadChar: a character that starts no token, e.g. `#` or a NUL byte.
	BadChar Code = "WF0002"
	// Unterminated: a string or block comment that runs to the end of the file.
	Unterminated Code = "WF0003"
	// BadString: an invalid escape sequence in a string literal.
	BadString Code = "WF0004"
	// BadNumber: a malformed number or duration literal, e.g. `5x` or `1h5`.
	BadNumber Code = "WF0005"
	// FileTooLarge: the source exceeds the size limit (4 MiB).
	FileTooLarge Code = "WF0006"
	// TooDeep: brackets or blocks nested deeper than the limit (64).
	TooDeep Code = "WF0007"
	// BadUTF8: the source is not valid UTF-8.
	BadUTF8 Code = "WF0008"
	// NoWorkflow: the file declares no workflow (e.g. an empty file).
	NoWorkflow Code = "WF0009"
	// ExtraWorkflow: a second workflow block in the same file.
	ExtraWorkflow Code = "WF0010"
	// TooManyDiags: a file has more diagnostics than are shown (MaxPerFile); this
	// one, after the first MaxPerFile, says how many more were left out. Its
	// severity is that of the most serious one left out.
	TooManyDiags Code = "WF0011"
)

// Names and structure: WF1xxx.
const (
	// UnknownNode: a reference to a node id that is not declared, in `after`,
	// a branch or route target, `back_to`, `on_error`, or an expression.
	UnknownNode Code = "WF1001"
	// DuplicateNode: two nodes with the same id.
	DuplicateNode Code = "WF1002"
	// UnknownHandler: `run "x"` names a handler that is neither built in nor declared.
	UnknownHandler Code = "WF1003"
	// DuplicateHandler: a handler declared twice.
	DuplicateHandler Code = "WF1004"
	// Duplicate: a repeated input, output, field, `with` entry or setting.
	Duplicate Code = "WF1005"
	// UnknownItem: an item that the enclosing block does not accept, e.g. `model`
	// in a task or `retires` for `retry`.
	UnknownItem Code = "WF1006"
	// MissingItem: a required item is absent, e.g. a task without `run`.
	MissingItem Code = "WF1007"
	// ReservedName: a keyword used as a node id or input name.
	ReservedName Code = "WF1008"
	// BadValue: an item's value has the wrong form, e.g. `backoff sideways`,
	// `attempts 0`, or `timeout "5s"`.
	BadValue Code = "WF1009"
	// UnknownType: a type name that does not exist, e.g. `count: integer`.
	UnknownType Code = "WF1010"
	// ImportError: an import that cannot be read or parsed.
	ImportError Code = "WF1011"
	// UnknownGoal: `--goal` names a node that does not exist.
	UnknownGoal Code = "WF1012"
)

// Types and expressions: WF2xxx.
const (
	// ExprSyntax: a CEL expression or template that does not parse.
	ExprSyntax Code = "WF2001"
	// TypeError: a CEL type error — undeclared name, unknown field (with a
	// "did you mean" hint), no matching overload.
	TypeError Code = "WF2002"
	// NotBool: a `when`, `while` or branch rule whose type is not bool.
	NotBool Code = "WF2003"
	// MissingConfig: a required config field of the handler is not set in `with`.
	MissingConfig Code = "WF2004"
	// UnknownConfig: a `with` field the handler does not declare.
	UnknownConfig Code = "WF2005"
	// ConfigType: a `with` field whose expression type does not match the
	// handler's declared type.
	ConfigType Code = "WF2006"
	// DefaultType: an input default of the wrong type or not a constant.
	DefaultType Code = "WF2007"
	// CostLimit: an expression whose estimated evaluation cost exceeds the limit.
	CostLimit Code = "WF2008"
	// NotList: a `for_each` source that is not a list.
	NotList Code = "WF2009"
)

// Graph: WF3xxx.
const (
	// Cycle: a cycle through `after` or routing edges that is not a declared
	// loop; the message names the nodes on it.
	Cycle Code = "WF3001"
	// BadBackTo: `back_to` names a node that is not the loop node itself or an
	// ancestor that dominates it.
	BadBackTo Code = "WF3002"
	// Unreachable: a node that no entry node can reach (only possible through
	// routing to it from nowhere; reported as a warning).
	Unreachable Code = "WF3003"
	// NoTerminalPath: a node from which no terminal node can be reached.
	NoTerminalPath Code = "WF3004"
	// NoTerminal: the workflow has no terminal node.
	NoTerminal Code = "WF3005"
	// AfterBranch: a node is `after` a branching node (branch, agent routes)
	// that can never route to it.
	AfterBranch Code = "WF3006"
	// SelfEdge: a node that depends on itself (`task a after a`).
	SelfEdge Code = "WF3007"
	// TooMany: a workflow limit is exceeded (nodes, static fan-out, IR size
	// with embedded child workflows).
	TooMany Code = "WF3008"
	// LoopBody: an edge leaves a loop body from a node other than the loop
	// node, or two loops overlap without one containing the other; each
	// iteration would send tokens out of the loop again.
	LoopBody Code = "WF3009"
)

// Joins and data safety: WF4xxx.
const (
	// JoinAllSkippable: a `join any` all of whose incoming edges may deliver a
	// skip token, so it may never run.
	JoinAllSkippable Code = "WF4001"
	// JoinNever: a join node (two or more incoming edges) none of whose
	// inputs can ever deliver a real token, because every source is removed
	// as dead by the optimiser; the node is removed too.
	JoinNever Code = "WF4002"
	// NotAncestor: an expression reads `x.output` but x is not guaranteed to
	// have finished first.
	NotAncestor Code = "WF4003"
	// MaybeSkipped: reads the output of an ancestor that may have been skipped,
	// without a `has(x.output)` guard.
	MaybeSkipped Code = "WF4004"
	// JoinSingle: `join` given on a node with fewer than two incoming edges.
	JoinSingle Code = "WF4005"
	// JoinExclusive: a `join all` whose incoming edges never all deliver a
	// real token in one run (they come from exclusive outcomes of one
	// node: branch rules, agent routes, approval and rejection, success and
	// on_error), so it can never run.
	JoinExclusive Code = "WF4006"
	// JoinFirstLoop: a `join first` the runtime cannot run: in a loop body,
	// or the nodes it would cancel (those that only feed it) hold a loop,
	// a loop body's node or a for_each node.
	JoinFirstLoop Code = "WF4007"
	// JoinFirstNothing: a `join first` that has nothing to cancel: every
	// node before it also feeds another node, so it is a `join any`.
	JoinFirstNothing Code = "WF4008"
)

// Optimiser: WF5xxx.
const (
	// DeadNode: a node behind a constant-false predicate or branch rule is
	// removed.
	DeadNode Code = "WF5001"
	// ConstCondition: a condition that is always true or always false.
	ConstCondition Code = "WF5002"
	// RedundantAfter: an `after` edge implied by other edges; it is dropped.
	RedundantAfter Code = "WF5003"
)

// Secrets: WF6xxx.
const (
	// CredentialLiteral: a credential-looking header of the http handler
	// (Authorization, X-Api-Key, ...) with a literal value, which the IR
	// keeps in clear in Redis; a secret input should give it.
	CredentialLiteral Code = "WF6001"
	// SecretOutput: a workflow output reads a secret input; the run's
	// result would hold *** in its place.
	SecretOutput Code = "WF6002"
)

// Internal errors: WF9xxx.
const (
	// Internal: the compiler produced an IR that its own checks reject; a bug
	// in wfc, never in the workflow. Please report it with the source.
	Internal Code = "WF9001"
)

var all = []CodeInfo{
	{SyntaxError, Error, "syntax error"},
	{BadChar, Error, "invalid character"},
	{Unterminated, Error, "unterminated string or comment"},
	{BadString, Error, "invalid string literal"},
	{BadNumber, Error, "invalid number or duration"},
	{FileTooLarge, Error, "file too large"},
	{TooDeep, Error, "nesting too deep"},
	{BadUTF8, Error, "invalid UTF-8"},
	{NoWorkflow, Error, "no workflow declared"},
	{ExtraWorkflow, Error, "more than one workflow"},
	{TooManyDiags, Error, "too many diagnostics"},

	{UnknownNode, Error, "unknown node"},
	{DuplicateNode, Error, "duplicate node id"},
	{UnknownHandler, Error, "unknown handler"},
	{DuplicateHandler, Error, "duplicate handler"},
	{Duplicate, Error, "duplicate declaration"},
	{UnknownItem, Error, "item not allowed here"},
	{MissingItem, Error, "required item missing"},
	{ReservedName, Error, "reserved word used as a name"},
	{BadValue, Error, "invalid value"},
	{UnknownType, Error, "unknown type"},
	{ImportError, Error, "import failed"},
	{UnknownGoal, Error, "unknown goal"},

	{ExprSyntax, Error, "expression syntax error"},
	{TypeError, Error, "type error"},
	{NotBool, Error, "condition is not bool"},
	{MissingConfig, Error, "missing handler config field"},
	{UnknownConfig, Error, "unknown handler config field"},
	{ConfigType, Error, "handler config field has the wrong type"},
	{DefaultType, Error, "invalid input default"},
	{CostLimit, Error, "expression too expensive"},
	{NotList, Error, "for_each source is not a list"},

	{Cycle, Error, "cycle"},
	{BadBackTo, Error, "invalid back_to target"},
	{Unreachable, Warning, "unreachable node"},
	{NoTerminalPath, Error, "no path to a terminal node"},
	{NoTerminal, Error, "no terminal node"},
	{AfterBranch, Error, "after a branch that never routes here"},
	{SelfEdge, Error, "node depends on itself"},
	{TooMany, Error, "limit exceeded"},
	{LoopBody, Error, "edge leaves a loop body"},

	{JoinAllSkippable, Warning, "join may never run"},
	{JoinNever, Warning, "join can never fire"},
	{NotAncestor, Error, "output of a node that is not an ancestor"},
	{MaybeSkipped, Warning, "output of a node that may be skipped"},
	{JoinSingle, Warning, "join on a node with one input"},
	{JoinExclusive, Error, "join all can never run"},
	{JoinFirstLoop, Error, "join first cannot cancel this"},
	{JoinFirstNothing, Warning, "join first cancels nothing"},

	{DeadNode, Warning, "node removed: never runs"},
	{ConstCondition, Warning, "constant condition"},
	{RedundantAfter, Info, "redundant after edge"},

	{CredentialLiteral, Warning, "literal credential in a header"},
	{SecretOutput, Warning, "secret input in a workflow output"},

	{Internal, Error, "internal compiler error"},
}

var registry = func() map[Code]CodeInfo {
	m := make(map[Code]CodeInfo, len(all))
	for _, c := range all {
		m[c.Code] = c
	}
	return m
}()
