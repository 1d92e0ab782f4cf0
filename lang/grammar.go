package lang

import (
	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// The participle grammar. These types stay private: ParseFile converts them
// to the public tree in lang/ast, so participle types never leave lang/.
// Block items are generic where possible (`parser:"key value"`, `parser:"key => targets"`) so
// that an unknown or misplaced keyword reaches the compiler as a well-formed
// item and gets a precise message ("`parser:"model"` is not allowed in a task"),
// instead of a grammar dump from the parser.

type gFile struct {
	Items []*gTop `parser:"(@@ \";\"?)*"`
}

type gTop struct {
	Pos      lexer.Position
	EndPos   lexer.Position
	Import   *gString   `parser:"  \"import\" @@"`
	Handler  *gHandler  `parser:"| @@"`
	Workflow *gWorkflow `parser:"| @@"`
}

type gIdent struct {
	Pos  lexer.Position
	Name string `parser:"@Ident"`
}

type gString struct {
	Pos lexer.Position
	Raw string `parser:"@String"`
}

type gHandler struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   *gString     `parser:"\"handler\" @@"`
	Items  []*gHandItem `parser:"\"{\" (@@ \";\"?)* \"}\""`
}

type gHandItem struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Types   *gTypeBlock `parser:"  @@"`
	Setting *gSetting   `parser:"| @@"`
}

type gWorkflow struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   *gIdent   `parser:"\"workflow\" @@"`
	Items  []*gWItem `parser:"\"{\" (@@ \";\"?)* \"}\""`
}

type gWItem struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Node    *gNode       `parser:"  (?= Ident Ident (\"{\" | \"after\" | \"join\")) @@"`
	Handler *gHandler    `parser:"| @@"`
	Input   *gFieldBlock `parser:"| @@"`
	Params  *gParamBlock `parser:"| (?= \"output\") @@"`
	Block   *gBlock      `parser:"| (?= \"finally\" \"{\") @@"`
	Setting *gSetting    `parser:"| @@"`
}

type gNode struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Kind   *gIdent   `parser:"@@"`
	Name   *gIdent   `parser:"@@"`
	After  []*gIdent `parser:"(\"after\" @@ (\",\" @@)*)?"`
	Join   *gIdent   `parser:"(\"join\" @@)?"`
	Items  []*gItem  `parser:"\"{\" (@@ \";\"?)* \"}\""`
}

// gItem is an item of a node body or of a retry/loop/compensate block.
// Keyword-led alternatives come first; a generic `parser:"key { ... }"` block comes
// last so a misspelt block name still parses and the compiler can say
// "unknown item `parser:"retires"`, did you mean `parser:"retry"`?".
type gItem struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Params *gParamBlock `parser:"  (?= \"with\") @@"`
	Types  *gTypeBlock  `parser:"| (?= \"output\" | \"config\") @@"`
	// approvers (and escalate_to) with a list of string literals is a
	// setting (formatted as a list); any other is an expression (a Cond).
	Approvers *gSetting `parser:"| (?= (\"approvers\" | \"escalate_to\") \"[\" (String (\",\" String)* \",\"?)? \"]\") @@"`
	Cond      *gCond    `parser:"| @@"`
	ForEach   *gForEach `parser:"| @@"`
	Branch    *gBranch  `parser:"| @@"`
	Routes    *gRoutes  `parser:"| @@"`
	Goto      *gGoto    `parser:"| @@"`
	Setting   *gSetting `parser:"| @@"`
	Block     *gBlock   `parser:"| @@"`
}

type gParamBlock struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    *gIdent   `parser:"@@ \"{\""`
	Params []*gParam `parser:"(@@ (\";\" | \",\")?)* \"}\""`
}

type gParam struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   *gIdent `parser:"@@ \"=\""`
	Value  *gExpr  `parser:"@@"`
}

type gTypeBlock struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    *gIdent   `parser:"@@ \"{\""`
	Fields []*gField `parser:"(@@ (\";\" | \",\")?)* \"}\""`
}

type gFieldBlock struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    *gIdent   `parser:"(?= \"input\") @@ \"{\""`
	Fields []*gField `parser:"(@@ (\";\" | \",\")?)* \"}\""`
}

type gField struct {
	Pos      lexer.Position
	EndPos   lexer.Position
	Name     *gIdent `parser:"@@"`
	Optional bool    `parser:"@\"?\"?"`
	Type     *gType  `parser:"\":\" @@"`
	Default  *gExpr  `parser:"(\"=\" @@)?"`
}

type gType struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Fields []*gField `parser:"(  \"{\" (@@ (\";\" | \",\")?)* \"}\""`
	Name   *gIdent   `parser:"| @@"`
	Args   []*gType  `parser:"  (\"<\" @@ (\",\" @@)* \">\")? )"`
}

type gCond struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    *gIdent `parser:"(?= \"when\" | \"while\" | \"dispatch\" | \"approvers\" | \"escalate_to\") @@"`
	Expr   *gExpr  `parser:"@@"`
}

type gForEach struct {
	Pos      lexer.Position
	EndPos   lexer.Position
	Key      *gIdent `parser:"(?= \"for_each\") @@"`
	Index    *gIdent `parser:"((?= Ident \",\") @@ \",\")?"`
	Var      *gIdent `parser:"@@ \"in\""`
	Items    *gExpr  `parser:"@@"`
	Parallel *gValue `parser:"(\"parallel\" @@)?"`
	Tolerate *gValue `parser:"(\"tolerate\" @@"`
	Percent  bool    `parser:"  @\"%\"?)?"`
}

type gBranch struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    *gIdent  `parser:"(?= \"branch\") @@ \"{\""`
	Rules  []*gRule `parser:"(@@ \";\"?)* \"}\""`
}

type gRule struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Else    bool      `parser:"(  @\"else\""`
	Cond    *gExpr    `parser:"| \"when\" @@ )"`
	Targets []*gIdent `parser:"\"=>\" @@ (\",\" @@)*"`
}

type gBlock struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    *gIdent  `parser:"@@ \"{\""`
	Items  []*gItem `parser:"(@@ \";\"?)* \"}\""`
}

type gGoto struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Key     *gIdent    `parser:"(?= Ident (String (\",\" String)*)? \"=>\") @@"`
	Codes   []*gString `parser:"(@@ (\",\" @@)*)? \"=>\""`
	Targets []*gIdent  `parser:"@@ (\",\" @@)*"`
}

type gRoutes struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Key     *gIdent   `parser:"(?= \"routes\") @@"`
	Targets []*gIdent `parser:"@@ (\",\" @@)*"`
}

type gSetting struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    *gIdent `parser:"@@"`
	Value  *gValue `parser:"@@"`
}

type gValue struct {
	Pos      lexer.Position
	EndPos   lexer.Position
	Duration *string  `parser:"(  @Duration"`
	Number   *string  `parser:" | @(\"-\"? (Float | Int))"`
	Str      *gString `parser:" | @@"`
	List     *gList   `parser:" | @@"`
	Ident    *gIdent  `parser:" | @@ )"`
}

type gList struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Items  []*gValue `parser:"\"[\" (@@ (\",\" @@)* \",\"?)? \"]\""`
}

var (
	fileParser = participle.MustBuild[gFile](
		participle.Lexer(wfLexer{}),
		participle.UseLookahead(1),
	)
	topParser   = mustProduction[gTop]()
	wItemParser = mustProduction[gWItem]()
	itemParser  = mustProduction[gItem]()
	paramParser = mustProduction[gParam]()
)

func mustProduction[P any]() *participle.Parser[P] {
	p, err := participle.ParserForProduction[P](fileParser)
	if err != nil {
		panic(err)
	}
	return p
}

// Grammar returns the EBNF of the participle grammar; a golden test keeps
// docs/language.md in step with it.
func Grammar() string { return fileParser.String() }
