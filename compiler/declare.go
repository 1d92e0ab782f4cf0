package compiler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// reserved words may not name nodes or inputs: wf keywords that would make
// the source ambiguous, CEL's reserved words, and the scope names.
var reserved = map[string]bool{
	"input": true, "output": true, "workflow": true, "task": true, "agent": true,
	"human": true, "flow": true, "handler": true, "import": true, "after": true,
	"join": true, "when": true, "else": true, "true": true, "false": true, "null": true,
	"in": true, "as": true, "break": true, "const": true, "continue": true, "for": true,
	"function": true, "if": true, "let": true, "loop": true, "package": true,
	"namespace": true, "return": true, "var": true, "void": true, "while": true,
	"has": true, "all": true, "exists": true, "exists_one": true, "map": true, "filter": true,
	"run": true, // the run's metadata in expressions: run.id
}

// declare collects declarations: handlers (built-in, imported, declared),
// the workflow, its settings, inputs, outputs and node ids.
func (s *state) declare() {
	var wfs []*ast.Workflow
	for _, it := range s.ast.Items {
		switch it := it.(type) {
		case *ast.Import:
			s.importFile(it)
		case *ast.Handler:
			s.declareHandler(it)
		case *ast.Workflow:
			wfs = append(wfs, it)
		}
	}
	if len(wfs) == 0 {
		if !s.rp.Diags.HasErrors() {
			s.errorf(diag.NoWorkflow, source.Range{}, "no workflow declared in %s", s.file.Name).
				WithHint("a file needs one `workflow name { ... }` block")
		}
		return
	}
	for _, w := range wfs[1:] {
		s.errorf(diag.ExtraWorkflow, w.Name.Range, "workflow `%s` is ignored: a file declares only one workflow", w.Name.Name).
			WithRelated(s.span(wfs[0].Name.Range), "first workflow declared here")
	}
	s.wf = wfs[0]
	s.name = s.wf.Name.Name
	s.info.Workflow = s.name
	if n := len(s.wf.Items); len(s.byID) == 0 && len(s.info.Exprs) == 0 {
		// Sized for a node per item (and a couple of expressions each):
		// growing maps of 10,000 entries step by step rehashes them often.
		s.byID = make(map[string]*node, n)
		s.info.Nodes = make(map[string]*NodeInfo, n)
		s.info.Exprs = make(map[*ast.Expr]*ExprInfo, 2*n)
		s.info.Refs = make([]Ref, 0, 4*n) // after names, handlers, expressions
	}
	seenSetting := map[string]*ast.Setting{}
	for _, it := range s.wf.Items {
		switch it := it.(type) {
		case *ast.Handler:
			s.declareHandler(it)
		case *ast.Setting:
			if prev := seenSetting[it.Key.Name]; prev != nil {
				s.errorf(diag.Duplicate, it.Key.Range, "`%s` is set twice", it.Key.Name).
					WithRelated(s.span(prev.Range), "first set here")
				continue
			}
			seenSetting[it.Key.Name] = it
			s.workflowSetting(it)
		case *ast.InputBlock:
			s.declareInputs(it)
		case *ast.Block: // finally
			if s.finally != nil {
				s.errorf(diag.Duplicate, it.Key.Range, "`finally` appears twice").WithRelated(s.span(s.finally.block.Key.Range), "first given here")
				continue
			}
			s.finally = s.finallyBlock(it)
		case *ast.ParamBlock: // output
			seen := map[string]*ast.Param{}
			for _, p := range it.Params {
				if prev := seen[p.Name.Name]; prev != nil {
					s.errorf(diag.Duplicate, p.Name.Range, "output `%s` is declared twice", p.Name.Name).
						WithRelated(s.span(prev.Name.Range), "first declared here")
					continue
				}
				seen[p.Name.Name] = p
				s.outputs = append(s.outputs, p)
			}
		case *ast.NodeDecl:
			s.declareNode(it.Kind, it.Name, it)
		case *ast.Bad:
			if it.Name != nil && it.Kind != nil {
				s.declareNode(it.Kind, it.Name, nil)
			}
		default:
			if k := ast.KeyOf(it); k != nil {
				s.unknownItem(k, "workflow", workflowItems)
			}
		}
	}
	if len(s.nodes) > s.cfg.MaxNodes {
		n := s.nodes[s.cfg.MaxNodes]
		s.errorf(diag.TooMany, n.ident.Range, "workflow has %d nodes; the limit is %d", len(s.nodes), s.cfg.MaxNodes)
	}
}

var workflowItems = []string{"version", "description", "deadline", "max_hops", "max_fanout", "max_input_bytes", "max_output_bytes", "max_state_bytes", "input", "output", "finally", "handler", "task", "agent", "human", "flow"}

func (s *state) unknownItem(k *ast.Ident, where string, allowed []string) {
	// After a syntax error or a bad character earlier on the same line the
	// parser resumed mid-line (`task e run "x"`, `# a comment`): what it
	// read there is debris, not a misspelt item.
	line := s.file.Span(k.Range).Start.Line
	for _, d := range s.rp.Diags {
		if (d.Code == diag.SyntaxError || d.Code == diag.BadChar) && d.Span.File == s.file.Name &&
			d.Span.Start.Line == line && d.Span.Start.Offset <= k.Start {
			return
		}
	}
	d := s.errorf(diag.UnknownItem, k.Range, "unknown item `%s` in %s", k.Name, where)
	// Keywords are few and fixed, so a looser match than for user names
	// is still safe: `retires` finds `retry`.
	if sug := suggestWithin(k.Name, allowed, max(2, len(k.Name)/2)); sug != "" {
		d.WithHint(fmt.Sprintf("did you mean `%s`?", sug))
		d.WithFix(fmt.Sprintf("Change to `%s`", sug), s.span(k.Range), sug)
		return
	}
	if where == "workflow" && itemKinds[k.Name] != nil {
		hint := fmt.Sprintf("`%s` is an item of nodes, not of the workflow", k.Name)
		if k.Name == "timeout" {
			hint += "; the limit of a whole run is `deadline`"
		}
		d.WithHint(hint)
	}
}

func (s *state) workflowSetting(it *ast.Setting) {
	switch it.Key.Name {
	case "version":
		s.version = s.stringValue(it)
	case "description":
		s.desc = s.stringValue(it)
	case "deadline":
		s.settings.DeadlineMS = s.durationValue(it)
	case "max_hops":
		s.settings.MaxHops = s.intValue(it, 1, 1<<31-1)
	case "max_fanout":
		s.settings.MaxFanout = s.intValue(it, 1, 1<<31-1)
	case "max_input_bytes":
		s.settings.MaxInputBytes = s.intValue(it, 1, ir.MaxSettingBytes)
	case "max_output_bytes":
		s.settings.MaxOutputBytes = s.intValue(it, 1, ir.MaxSettingBytes)
	case "max_state_bytes":
		s.settings.MaxStateBytes = s.intValue(it, 1, ir.MaxSettingBytes)
	default:
		s.unknownItem(it.Key, "workflow", workflowItems)
	}
}

func (s *state) wrongValue(it *ast.Setting, want string) {
	s.errorf(diag.BadValue, it.Value.Range, "`%s` expects %s, found %s", it.Key.Name, want, it.Value.Kind)
}

func (s *state) stringValue(it *ast.Setting) string {
	if it.Value.Kind != ast.StringValue {
		s.wrongValue(it, "a string")
		return ""
	}
	s.noTemplate(it.Key.Name, it.Value.Str)
	return it.Value.Str.Value
}

// noTemplate reports a {{ }} template where only a plain string is allowed
// (names and paths are fixed at compile time).
func (s *state) noTemplate(key string, str *ast.String) {
	if str != nil && str.Template != nil {
		s.errorf(diag.BadValue, str.Range, "`%s` takes a plain string; {{ }} templates are only allowed in `with` values, workflow `output` entries and prompts", key)
	}
}

func (s *state) durationValue(it *ast.Setting) int64 {
	if it.Value.Kind != ast.DurationValue {
		s.wrongValue(it, "a duration such as 30s or 1h30m")
		return 0
	}
	return s.parseDuration(it.Value)
}

func (s *state) parseDuration(v *ast.Value) int64 {
	d, err := time.ParseDuration(v.Raw)
	if err != nil {
		// The lexer reports malformed durations; what is left is overflow.
		if !s.reported(diag.BadNumber, v.Range) {
			s.errorf(diag.BadNumber, v.Range, "duration `%s` is too large", v.Raw).
				WithHint("durations must be below about 290 years (2^63 ns)")
		}
		return 0
	}
	if d <= 0 {
		s.errorf(diag.BadValue, v.Range, "duration must be positive, found `%s`", v.Raw)
		return 0
	}
	if d < time.Millisecond {
		s.errorf(diag.BadValue, v.Range, "duration `%s` is below the 1ms resolution", v.Raw)
		return 0
	}
	return d.Milliseconds()
}

// reported reports whether a diagnostic with code c already starts at r
// (e.g. the lexer's, for a token the compiler looks at again).
func (s *state) reported(c diag.Code, r source.Range) bool {
	for _, d := range s.rp.Diags {
		if d.Code == c && d.Span.File == s.file.Name && d.Span.Start.Offset == r.Start {
			return true
		}
	}
	return false
}

func (s *state) intValue(it *ast.Setting, lo, hi int64) int {
	if it.Value.Kind != ast.IntValue {
		s.wrongValue(it, "an integer")
		return 0
	}
	return s.parseInt(it.Key.Name, it.Value, lo, hi)
}

func (s *state) parseInt(key string, v *ast.Value, lo, hi int64) int {
	var n int64
	_, err := fmt.Sscan(v.Raw, &n)
	if v.Raw != "" && (v.Raw[0] == '0' && len(v.Raw) > 1 && (v.Raw[1] == 'x' || v.Raw[1] == 'X')) {
		_, err = fmt.Sscanf(v.Raw[2:], "%x", &n)
	}
	if err != nil {
		if s.reported(diag.BadNumber, v.Range) {
			return 0 // the lexer said why (e.g. `0x` without digits)
		}
		if strings.Trim(v.Raw, "-0123456789abcdefABCDEFxXuU") == "" {
			// Well-formed but beyond 64 bits.
			s.errorf(diag.BadValue, v.Range, "`%s` must be between %d and %d, found %s", key, lo, hi, v.Raw)
			return 0
		}
		s.errorf(diag.BadNumber, v.Range, "invalid integer `%s`", v.Raw)
		return 0
	}
	if n < lo || n > hi {
		s.errorf(diag.BadValue, v.Range, "`%s` must be between %d and %d, found %d", key, lo, hi, n)
		return 0
	}
	return int(n)
}

func (s *state) declareInputs(b *ast.InputBlock) {
	for _, f := range b.Fields {
		name := f.Name.Name
		if reserved[name] {
			s.errorf(diag.ReservedName, f.Name.Range, "`%s` is a reserved word and cannot name an input", name)
			continue
		}
		if prev := s.info.Inputs[name]; prev != nil {
			s.errorf(diag.Duplicate, f.Name.Range, "input `%s` is declared twice", name).
				WithRelated(s.span(prev.Decl.Name.Range), "first declared here")
			continue
		}
		var t *ir.Type
		if f.Type != nil && f.Type.Name != nil && f.Type.Name.Name == ir.KindSecret {
			// secret: the type of an input only (typeDepth refuses it elsewhere).
			if len(f.Type.Args) > 0 {
				s.errorf(diag.UnknownType, f.Type.Range, "`secret` takes no type arguments")
			}
			t = &ir.Type{Kind: ir.KindSecret}
		} else {
			t = s.typeOf(f.Type)
		}
		in := &InputInfo{Name: name, Type: t, Required: !f.Optional && f.Default == nil, Decl: f}
		if implicitSecretDefault(in) {
			in.Required = false // its default is its own name
		}
		s.inputs = append(s.inputs, in)
		s.info.Inputs[name] = in
	}
}

// implicitSecretDefault reports whether in is a secret input whose default
// is its own name: one with neither a default nor `?`.
func implicitSecretDefault(in *InputInfo) bool {
	return in.Type.Kind == ir.KindSecret && in.Decl.Default == nil && !in.Decl.Optional
}

func (s *state) declareHandler(h *ast.Handler) {
	name := h.Name.Value
	if name == "" {
		s.errorf(diag.BadValue, h.Name.Range, "handler name must not be empty")
		return
	}
	s.noTemplate("handler", h.Name)
	if prev := s.handlers[name]; prev != nil {
		d := s.errorf(diag.DuplicateHandler, h.Name.Range, "handler %q is declared twice", name)
		if prev.Decl != nil {
			if f := s.files[prev.File]; f != nil {
				d.WithRelated(f.Span(prev.Decl.Name.Range), "first declared here")
			}
		} else if prev.Builtin {
			d.Message = fmt.Sprintf("handler %q is built in and cannot be redeclared", name)
		}
		return
	}
	hi := &HandlerInfo{Name: name, Decl: h, File: s.file.Name, Config: obj(), Output: &ir.Type{Kind: ir.KindAny}}
	seen := map[string]bool{}
	for _, it := range h.Items {
		k := ast.KeyOf(it)
		if k == nil {
			continue
		}
		if seen[k.Name] {
			s.errorf(diag.Duplicate, k.Range, "`%s` appears twice in handler %q", k.Name, name)
			continue
		}
		seen[k.Name] = true
		switch it := it.(type) {
		case *ast.TypeBlock:
			t := s.objectType(it.Fields)
			switch k.Name {
			case "config":
				hi.Config = t
			case "output":
				hi.Output = t
			default:
				s.unknownItem(k, "handler", []string{"config", "output", "description"})
			}
		case *ast.Setting:
			if k.Name == "description" {
				hi.Doc = s.stringValue(it)
			} else {
				s.unknownItem(k, "handler", []string{"config", "output", "description"})
			}
		default:
			s.unknownItem(k, "handler", []string{"config", "output", "description"})
		}
	}
	s.handlers[name] = hi
	s.info.Handlers[name] = hi
}

// importFile reads the handler declarations of another file.
func (s *state) importFile(im *ast.Import) {
	if im.Path.Template != nil {
		s.noTemplate("import", im.Path)
		return
	}
	path := s.cfg.resolve(s.file.Name, im.Path.Value)
	for _, p := range append(s.cfg.stack, s.file.Name) {
		if p == path {
			s.errorf(diag.ImportError, im.Path.Range, "import cycle: %s → %s", strings.Join(append(s.cfg.stack, s.file.Name), " → "), path)
			return
		}
	}
	if _, done := s.files[path]; done {
		return // already imported along another path
	}
	if s.cfg.depth >= MaxImportDepth {
		s.errorf(diag.ImportError, im.Path.Range, "imports nested deeper than %d (an import cycle?)", MaxImportDepth)
		return
	}
	src, err := s.cfg.ReadFile(path)
	if err != nil {
		s.errorf(diag.ImportError, im.Path.Range, "cannot read %q: %v", im.Path.Value, unwrapPathErr(err))
		return
	}
	f := source.NewFile(path, src)
	file, diags := lang.ParseFile(f)
	s.files[path] = f
	if diags.HasErrors() {
		s.errorf(diag.ImportError, im.Path.Range, "%q has syntax errors", im.Path.Value).
			WithRelated(diags[0].Span, diags[0].Message)
		return
	}
	sub := newState(Config{ReadFile: s.cfg.ReadFile, celOnly: s.cfg.celOnly, depth: s.cfg.depth + 1, stack: append(append([]string{}, s.cfg.stack...), s.file.Name)}, f, file)
	sub.files = s.files // shared, so a file imported twice is read once
	for _, it := range file.Items {
		switch it := it.(type) {
		case *ast.Import:
			sub.importFile(it)
		case *ast.Handler:
			sub.declareHandler(it)
		}
	}
	for k, v := range sub.files {
		s.files[k] = v
	}
	if len(sub.rp.Diags) > 0 {
		d := sub.rp.Diags.Sorted()[0]
		if k := strings.Index(d.Message, "import cycle: "); k >= 0 {
			// Say the cycle once, not wrapped once per import on it.
			s.errorf(diag.ImportError, im.Path.Range, "%s", d.Message[k:]).WithRelated(d.Span, "the cycle continues here")
		} else {
			s.errorf(diag.ImportError, im.Path.Range, "import %q: %s", im.Path.Value, d.Message).WithRelated(d.Span, d.Message)
		}
	}
	names := make([]string, 0, len(sub.handlers))
	for n := range sub.handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h := sub.handlers[n]
		if h.Builtin {
			continue
		}
		if prev := s.handlers[n]; prev != nil && prev != h {
			if prev.Decl == h.Decl {
				continue
			}
			s.errorf(diag.DuplicateHandler, im.Path.Range, "import %q redeclares handler %q", im.Path.Value, n)
			continue
		}
		s.handlers[n] = h
		s.info.Handlers[n] = h
	}
}

func unwrapPathErr(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && u.Unwrap() != nil {
		return u.Unwrap()
	}
	return err
}

func (s *state) declareNode(kind, name *ast.Ident, decl *ast.NodeDecl) {
	switch kind.Name {
	case "task", "agent", "human", "flow":
	default:
		if decl != nil {
			d := s.errorf(diag.UnknownItem, kind.Range, "unknown node kind `%s`", kind.Name)
			s.didYouMean(d, kind.Range, kind.Name, []string{"task", "agent", "human", "flow"})
			if d.Hint == "" {
				d.WithHint("a node is a task, agent, human or flow")
			}
		}
		return
	}
	if reserved[name.Name] {
		s.errorf(diag.ReservedName, name.Range, "`%s` is a reserved word and cannot name a node", name.Name)
		s.badNodeIDs = true
		return
	}
	if prev := s.byID[name.Name]; prev != nil {
		s.errorf(diag.DuplicateNode, name.Range, "node `%s` is declared twice", name.Name).
			WithRelated(s.span(prev.ident.Range), "first declared here")
		return
	}
	n := &node{id: name.Name, idx: len(s.nodes), kind: kind.Name, ident: name, decl: decl, join: ir.JoinAll}
	s.nodes = append(s.nodes, n)
	s.byID[n.id] = n
	s.info.Order = append(s.info.Order, n.id)
	s.info.Nodes[n.id] = &NodeInfo{ID: n.id, Kind: n.kind, Decl: decl}
}

// typeAliases maps type names of other languages (lower-cased) to wf's.
var typeAliases = map[string]string{
	"integer": "int", "int64": "int", "long": "int", "uint": "int",
	"float": "number", "double": "number", "float64": "number", "decimal": "number",
	"boolean": "bool", "str": "string", "text": "string",
	"array": "list", "dict": "map", "object": "map", "dyn": "any",
	"string": "string", "int": "int", "number": "number", "bool": "bool",
	"duration": "duration", "any": "any", "list": "list", "map": "map",
	"password": "secret", "token": "secret", "credential": "secret",
}

// typeOf converts a type expression.
func (s *state) typeOf(t *ast.Type) *ir.Type {
	return s.typeDepth(t, 0)
}

func (s *state) typeDepth(t *ast.Type, depth int) *ir.Type {
	if t == nil {
		return &ir.Type{Kind: ir.KindAny}
	}
	if depth > lang.MaxDepth {
		s.errorf(diag.TooDeep, t.Range, "type nested deeper than %d levels", lang.MaxDepth)
		return &ir.Type{Kind: ir.KindAny}
	}
	if t.Name == nil {
		return s.objectTypeDepth(t.Fields, depth+1)
	}
	name := t.Name.Name
	args := func(n int) []*ir.Type {
		if len(t.Args) != n {
			s.errorf(diag.UnknownType, t.Range, "`%s` takes %d type argument(s), found %d", name, n, len(t.Args))
			return nil
		}
		out := make([]*ir.Type, n)
		for i, a := range t.Args {
			out[i] = s.typeDepth(a, depth+1)
		}
		return out
	}
	switch name {
	case "secret":
		s.errorf(diag.UnknownType, t.Range, "`secret` is only the type of a workflow input, not of a field, an element or a handler's config or output").
			WithHint("declare the secret as an input (`token: secret`) and use input.token here")
		return &ir.Type{Kind: ir.KindAny}
	case "string", "int", "number", "bool", "duration", "any":
		if len(t.Args) > 0 {
			s.errorf(diag.UnknownType, t.Range, "`%s` takes no type arguments", name)
		}
		return &ir.Type{Kind: name}
	case "map":
		// map<T> and map<string, T> are the same type: keys are strings,
		// as in JSON objects.
		if len(t.Args) == 2 {
			if k := t.Args[0]; k.Name == nil || k.Name.Name != "string" || len(k.Args) > 0 {
				s.errorf(diag.UnknownType, k.Range, "map keys are always strings; write map<T> or map<string, T>")
			}
			return &ir.Type{Kind: name, Elem: s.typeDepth(t.Args[1], depth+1)}
		}
		a := args(1)
		if a == nil {
			return &ir.Type{Kind: name, Elem: &ir.Type{Kind: ir.KindAny}}
		}
		return &ir.Type{Kind: name, Elem: a[0]}
	case "list":
		a := args(1)
		if a == nil {
			return &ir.Type{Kind: name, Elem: &ir.Type{Kind: ir.KindAny}}
		}
		return &ir.Type{Kind: name, Elem: a[0]}
	}
	d := s.errorf(diag.UnknownType, t.Name.Range, "unknown type `%s`", name)
	if alias := typeAliases[strings.ToLower(name)]; alias != "" {
		d.WithHint(fmt.Sprintf("did you mean `%s`?", alias))
		d.WithFix(fmt.Sprintf("Change to `%s`", alias), s.span(t.Name.Range), alias)
	} else {
		s.didYouMean(d, t.Name.Range, name, []string{"string", "int", "number", "bool", "duration", "any", "list", "map", "secret"})
	}
	return &ir.Type{Kind: ir.KindAny}
}

func (s *state) objectType(fields []*ast.Field) *ir.Type { return s.objectTypeDepth(fields, 0) }

func (s *state) objectTypeDepth(fields []*ast.Field, depth int) *ir.Type {
	t := &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{}}
	seen := map[string]*ast.Field{}
	for _, f := range fields {
		if prev := seen[f.Name.Name]; prev != nil {
			s.errorf(diag.Duplicate, f.Name.Range, "field `%s` is declared twice", f.Name.Name).
				WithRelated(s.span(prev.Name.Range), "first declared here")
			continue
		}
		seen[f.Name.Name] = f
		if f.Default != nil {
			s.errorf(diag.BadValue, f.Default.Range, "a default value is only allowed in the workflow's input block")
		}
		t.Fields = append(t.Fields, ir.Field{Name: f.Name.Name, Type: *s.typeDepth(f.Type, depth), Optional: f.Optional})
	}
	return t
}
