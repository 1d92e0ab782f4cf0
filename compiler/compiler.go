package compiler

import (
	"path/filepath"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// Config controls a compilation. The zero value compiles and optimises.
type Config struct {
	// Goals, when set, keep only these nodes and what they need (seed 003's
	// plan generation); Result.RequiredInputs lists the inputs they read.
	Goals []string
	// NoOptimize turns off constant folding, dead-node removal and
	// transitive reduction.
	NoOptimize bool
	// ReadFile reads imports and child flows; nil means ReadFile, which
	// refuses anything but a regular file of at most lang.MaxFileSize
	// bytes. Paths are resolved relative to the importing file. A
	// replacement should be as careful: the paths come from the source.
	ReadFile func(path string) ([]byte, error)
	// StopAfter ends compilation after the named pass (see Passes); the
	// Result then holds whatever that pass produced. Used by --dump-after.
	StopAfter string
	// Limits; zero means the default.
	MaxNodes  int // default 10,000
	MaxFanout int // static out-edges of one node, default 1,000

	celOnly bool     // type every expression with cel-go, without the fast paths (tests compare)
	depth   int      // import / flow nesting
	stack   []string // files being imported, for cycle messages
	flows   []string // files of the enclosing workflows of flow nodes, likewise
}

// Default limits, documented in docs/language.md.
const (
	DefaultMaxNodes    = 10000
	DefaultMaxFanout   = 1000
	MaxImportDepth     = 16
	MaxExprCost        = 1_000_000
	MaxExprSize        = ir.MaxExprSize // code points
	MaxExprRecursion   = 100
	MaxExprNodes       = 10_000
	maxReportedPerPass = 1000
)

// A Result is everything a compilation produced. IR is nil when Diags has
// an error. Info is always set (possibly partially) so the language server
// can work on broken files.
type Result struct {
	File           *source.File
	AST            *ast.File
	Info           *Info
	IR             *ir.Workflow
	Diags          diag.List
	Files          map[string]*source.File // every file read, for rendering diagnostics
	RequiredInputs []string
}

// A pass is one named step of the compiler. Each reports everything it
// finds; run stops early only where a later pass needs an earlier one's
// result (see needsClean).
type pass struct {
	name string
	run  func(*state)
	// needsClean: skip this and later passes if errors were reported so far.
	needsClean bool
}

// passes is the compiler, in order. Pass names are API (--dump-after).
// It is set in init because a pass (flow children) calls Compile.
var passes []pass

func init() { passes = passList() }

func passList() []pass {
	return []pass{
		{"declare", (*state).declare, false},   // handlers, imports, inputs, outputs, settings, node ids
		{"items", (*state).items, false},       // node items: allowed per kind, values, required ones  (after declare)
		{"resolve", (*state).resolve, false},   // node and handler references, with "did you mean"      (after declare)
		{"graph", (*state).graph, false},       // edges, cycles, back_to dominance, terminals           (after resolve)
		{"types", (*state).types, false},       // CEL type checking of every expression and template  (after declare)
		{"dataflow", (*state).dataflow, false}, // x.output reads: ancestors, skippable sources         (after graph, types)
		{"joins", (*state).joins, false},       // join analysis diagnostics                             (after graph)
		{"fold", (*state).fold, true},          // CEL constant folding                                  (after types)
		{"lower", (*state).lower, true},        // build the IR                                          (after all checks)
		{"prune", (*state).prune, true},        // drop dead nodes and redundant after edges             (after lower, fold)
		{"goals", (*state).goals, true},        // keep what --goal needs                                (after prune)
		{"validate", (*state).validate, true},  // ir.Analyze + ir.Validate as a final self-check
	}
}

// Passes returns the pass names in order.
func Passes() []string {
	ps := passList()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.name
	}
	return out
}

// Compile compiles one .wf source.
func Compile(name string, src []byte, cfg Config) *Result {
	return CompileFile(source.NewFile(name, src), cfg)
}

// CompileFile compiles a parsed-to-be source file.
func CompileFile(f *source.File, cfg Config) *Result {
	if cfg.ReadFile == nil {
		cfg.ReadFile = ReadFile
	}
	if cfg.MaxNodes == 0 {
		cfg.MaxNodes = DefaultMaxNodes
	}
	if cfg.MaxFanout == 0 {
		cfg.MaxFanout = DefaultMaxFanout
	}
	// One reporter for the parser and the passes, so that the cap on
	// what is shown (diag.MaxPerFile) applies to them together.
	rp := &diag.Reporter{File: f}
	file := lang.Parse(f, rp)
	s := newState(cfg, f, file)
	s.rp = rp
	for _, p := range passes {
		if p.needsClean && s.rp.Diags.HasErrors() {
			break
		}
		p.run(s)
		if cfg.StopAfter == p.name {
			break
		}
	}
	res := &Result{File: f, AST: file, Info: s.info, Diags: s.rp.List(), Files: s.files, RequiredInputs: s.required}
	if !res.Diags.HasErrors() {
		res.IR = s.ir
	}
	return res
}

func (c Config) resolve(from, path string) string {
	if filepath.IsAbs(path) || from == "" || from == "-" {
		return path
	}
	return filepath.Join(filepath.Dir(from), path)
}
