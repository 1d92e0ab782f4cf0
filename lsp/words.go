package lsp

// The words of the language the server offers and explains. The compiler
// keeps the same tables unexported; words_test.go compiles a snippet for
// every entry so the two cannot drift apart.

// nodeKinds are the kinds a node declaration may have, in the order
// completion lists them.
var nodeKinds = []string{"task", "agent", "human", "flow"}

// A word is a keyword with the one-line form and explanation that
// completion and hover show.
type word struct {
	name  string
	form  string
	doc   string
	kinds []string // node items: the kinds that accept it
}

var allKinds = []string{"task", "agent", "human", "flow"}

// nodeItems are the items of a node body (docs/language.md §3.3).
var nodeItems = []word{
	{"run", `run "handler"`, "The handler the task runs (required in a task).", []string{"task"}},
	{"with", "with { name = expr … }", "The config passed to the handler, one CEL expression per field.", []string{"task", "agent", "flow"}},
	{"when", "when EXPR", "Run the node only when the condition is true; otherwise it is skipped.", allKinds},
	{"dispatch", "dispatch EXPR", "Choose the handler at run time: EXPR names one of the handlers of `run [\"a\", \"b\"]`.", []string{"task"}},
	{"retry", "retry { attempts N  backoff fixed|linear|exponential  delay D  max_delay D  on|except [codes] }", "Retry the node when it fails (only some error codes, with on or except).", allKinds},
	{"timeout", "timeout DURATION", "Fail the attempt when it runs longer than this.", allKinds},
	{"on_error", "on_error [\"code\", ...] => ids", "Nodes to run when this node fails (after its retries); with codes, only for failures with those error codes.", allKinds},
	{"description", `description "…"`, "Documentation of the node.", allKinds},
	{"output", "output { field: type … }", "Declares the type of the node's output.", allKinds},
	{"for_each", "for_each v in EXPR [parallel N]", "Run the node once per element of a list; its output is the list of outputs.", []string{"task", "flow"}},
	{"branch", "branch { when EXPR => ids … else => ids }", "Route to the targets of the first rule whose condition holds on the node's output.", []string{"task", "flow"}},
	{"loop", "loop { while EXPR  max N  back_to id  exhausted => ids }", "Run the node (or the loop body from back_to) again while the condition holds.", []string{"task", "flow"}},
	{"compensate", `compensate { run "handler"  with { … } }`, "The handler that undoes the node when the run fails later.", []string{"task", "flow"}},
	{"uses", `uses "child.wf"`, "The child workflow a flow node runs (required in a flow).", []string{"flow"}},
	{"model", `model "name"`, "The model an agent uses (required in an agent).", []string{"agent"}},
	{"temperature", "temperature NUMBER", "Sampling temperature of the agent, 0 to 2.", []string{"agent"}},
	{"prompt", `prompt "template"`, "The prompt: a string with {{ expr }} templates (required in an agent).", []string{"agent", "human"}},
	{"routes", "routes a, b", "The nodes the agent may route to; it picks one.", []string{"agent"}},
	{"default", "default => ids", "Where the agent goes when it picks none of its routes.", []string{"agent"}},
	{"max_routes", "max_routes N", "How many of its routes the agent may pick together (default 1).", []string{"agent"}},
	{"tools", "tools [name, …]", "The tools the agent may call (the worker must offer them).", []string{"agent"}},
	{"max_tool_calls", "max_tool_calls N", "The most tool calls the agent may make in one execution.", []string{"agent"}},
	{"max_tokens", "max_tokens N", "The most tokens the agent's conversation may use in one execution.", []string{"agent"}},
	{"approvers", `approvers ["…", …]`, "Who may approve (required in a human node).", []string{"human"}},
	{"on_timeout", "on_timeout approve|reject|fail", "What happens when nobody decides before the timeout.", []string{"human"}},
	{"on_reject", "on_reject => ids", "Nodes to run when the request is rejected.", []string{"human"}},
	{"escalate_to", `escalate_to ["…", …]`, "More approvers, who may decide too once escalate_after has passed.", []string{"human"}},
	{"escalate_after", "escalate_after DURATION", "How long the approval waits before escalate_to may decide (shorter than timeout).", []string{"human"}},
}

// workflowItems are the items of a workflow body.
var workflowItems = []word{
	{"task", "task id [after a, b] { run \"handler\" … }", "A node that runs a handler.", nil},
	{"agent", "agent id { model \"…\"  prompt \"…\" … }", "A node that asks a model and may route.", nil},
	{"human", "human id { approvers [\"…\"] … }", "A node that waits for a person's approval.", nil},
	{"flow", "flow id { uses \"child.wf\" … }", "A node that runs a child workflow.", nil},
	{"input", "input { name[?]: type [= default] … }", "The inputs of the workflow.", nil},
	{"output", "output { name = expr … }", "The result of a run.", nil},
	{"finally", "finally { run \"handler\"  with { … }  retry { … } }", "Runs once after the run ends (completed, failed after compensation, or cancelled); `run` holds its status, error, duration and failed nodes.", nil},
	{"handler", `handler "name" { config { … }  output { … } }`, "Declares a handler visible in this workflow.", nil},
	{"version", `version "…"`, "The workflow's own version string.", nil},
	{"description", `description "…"`, "Documentation of the workflow.", nil},
	{"deadline", "deadline DURATION", "Wall-clock limit of a run.", nil},
	{"max_hops", "max_hops N", "Limit of node executions along one chain of tokens.", nil},
	{"max_fanout", "max_fanout N", "Limit of the outgoing edges of a node and of the items of one for_each.", nil},
	{"max_input_bytes", "max_input_bytes N", "Limit of a run's inputs, as JSON bytes (at most the submitter's limit).", nil},
	{"max_output_bytes", "max_output_bytes N", "Limit of a node's output, as JSON bytes (at most the worker's limit).", nil},
	{"max_state_bytes", "max_state_bytes N", "Limit of the values a run stores: outputs, errors, items (at most the worker's limit).", nil},
}

// topItems are the declarations of a file.
var topItems = []word{
	{"workflow", "workflow name { … }", "The workflow of the file (exactly one).", nil},
	{"handler", `handler "name" { config { … }  output { … } }`, "Declares a handler, visible to files that import this one.", nil},
	{"import", `import "file.wf"`, "Makes the top-level handlers of another file visible.", nil},
}

// handlerItems are the items of a handler declaration.
var handlerItems = []word{
	{"config", "config { field: type … }", "The schema of the handler's config (`with`).", nil},
	{"output", "output { field: type … }", "The schema of the handler's output.", nil},
	{"description", `description "…"`, "Documentation of the handler.", nil},
}

// blockItems are the items of the nested blocks.
var blockItems = map[string][]word{
	"retry": {
		{"attempts", "attempts N", "How many attempts in all, 1 to 1000 (required).", nil},
		{"backoff", "backoff fixed|linear|exponential", "How the delay grows between attempts (default fixed).", nil},
		{"delay", "delay DURATION", "The first delay between attempts (default 1s).", nil},
		{"max_delay", "max_delay DURATION", "The longest delay between attempts.", nil},
		{"on", "on [\"code\", ...]", "Retry only failures with these error codes (a trailing * matches a prefix).", nil},
		{"except", "except [\"code\", ...]", "Never retry failures with these error codes.", nil},
	},
	"loop": {
		{"while", "while EXPR", "Loop again while this holds on the node's output (required).", nil},
		{"max", "max N", "The most iterations, 1 to 1,000,000 (required).", nil},
		{"back_to", "back_to id", "The node the loop goes back to (default: this node).", nil},
		{"exhausted", "exhausted => ids", "Where to go when max iterations are reached.", nil},
	},
	"compensate": {
		{"run", `run "handler"`, "The handler that undoes the node (required).", nil},
		{"with", "with { name = expr … }", "The config of the compensating handler.", nil},
	},
	"finally": {
		{"run", `run "handler"`, "The handler run once the run has ended (required).", nil},
		{"with", "with { name = expr … }", "Its config; `run` holds the ended run's metadata.", nil},
		{"retry", "retry { attempts N … }", "How its failed attempts are retried.", nil},
	},
	"branch": {
		{"when", "when EXPR => ids", "A rule: route to ids when the condition holds.", nil},
		{"else", "else => ids", "Where to go when no rule holds (last).", nil},
	},
}

// enumValues are the names a setting accepts as its value.
var enumValues = map[string][]string{
	"backoff":    {"fixed", "linear", "exponential"},
	"on_timeout": {"approve", "reject", "fail"},
	"join":       nil, // from joinModes (init)
}

// joinModes are the join modes, in the order completion lists them, each
// with the rule hover states for a node with two or more sources (%s: its
// sources, joined by conj). A mode the language gains is one row here:
// completion, hover and the inlay hint's tooltip follow.
var joinModes = []struct {
	name, conj, rule string
}{
	{"all", "and", "**join all**: runs only when %s have each sent a real token (each succeeded on its path here); skipped as soon as one of them cannot."},
	{"any", "or", "**join any**: runs at the first real token from %s; later tokens are ignored. Skipped if none sends one."},
	{"settled", "and", "**join settled**: waits until %s have all settled, then runs if at least one sent a real token (else it is skipped)."},
	{"first", "or", "**join first**: runs at the first real token from %s and cancels the pending work of the other paths into it; later tokens are ignored. Skipped if none sends one."},
}

// typeNames are the names of types (docs/language.md §5.1).
var typeNames = []string{"string", "int", "number", "bool", "duration", "any", "list", "map", "secret"}

// reserved words cannot name nodes or inputs (docs/language.md §2.5).
var reserved = map[string]bool{}

func init() {
	for _, m := range joinModes {
		enumValues["join"] = append(enumValues["join"], m.name)
	}
	for _, w := range []string{
		"input", "output", "workflow", "task", "agent", "human", "flow", "handler", "import", "after", "join", "when",
		"else", "while", "loop", "in", "true", "false", "null", "as", "break", "const", "continue", "for", "function", "if",
		"let", "package", "namespace", "return", "var", "void", "has", "all", "exists", "exists_one", "map", "filter", "run",
	} {
		reserved[w] = true
	}
}

// targetKeys are the items whose value is a list of node ids.
var targetKeys = map[string]bool{
	"after": true, "routes": true, "back_to": true,
}

// valueKeys are settings whose value is a literal the server does not
// complete.
var valueKeys = map[string]bool{
	"timeout": true, "attempts": true, "delay": true, "max_delay": true, "max": true, "temperature": true,
	"model": true, "prompt": true, "run": true, "uses": true, "description": true, "version": true,
	"deadline": true, "max_hops": true, "max_fanout": true, "max_input_bytes": true, "max_output_bytes": true, "max_state_bytes": true, "approvers": true, "parallel": true, "for_each": true,
	"import": true, "workflow": true,
}

// wordDoc finds the documentation of a keyword for hover, preferring the
// block it appears in.
func wordDoc(block, name string) (word, bool) {
	var lists [][]word
	switch block {
	case "node":
		lists = [][]word{nodeItems}
	case "workflow":
		lists = [][]word{workflowItems}
	case "handler":
		lists = [][]word{handlerItems}
	case "top":
		lists = [][]word{topItems}
	default:
		if l, ok := blockItems[block]; ok {
			lists = [][]word{l}
		}
	}
	lists = append(lists, nodeItems, workflowItems, topItems, handlerItems)
	for _, l := range lists {
		for _, w := range l {
			if w.name == name {
				return w, true
			}
		}
	}
	return word{}, false
}

// isIdent reports whether s is an identifier of the language.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func isIdentByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
