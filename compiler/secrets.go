package compiler

import (
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
)

// lintSecrets warns about credentials that would be stored in clear
// (docs/language.md §4.4): a literal value of a credential header of the
// http handler is part of the IR, which Redis holds in clear (WF6001); a
// workflow output that reads a secret input, and whose type can hold text,
// stores *** (WF6002).
func (s *state) lintSecrets() {
	for _, n := range s.nodes {
		if n.kind == "task" && n.handler == "http" {
			s.lintHeaders(n.with)
		}
		if c := n.compensate; c != nil && c.handler == "http" {
			s.lintHeaders(c.with)
		}
	}
	if f := s.finally; f != nil && f.handler == "http" {
		s.lintHeaders(f.with)
	}
	secret := map[string]bool{}
	for _, in := range s.inputs {
		if in.Type.Kind == ir.KindSecret {
			secret[in.Name] = true
		}
	}
	if len(secret) == 0 {
		return
	}
	for _, p := range s.outputs {
		if p.Value == nil {
			continue
		}
		if info := s.info.Exprs[p.Value]; info != nil && info.Type != nil {
			switch info.Type.Kind {
			case ir.KindBool, ir.KindInt, ir.KindNumber, ir.KindDuration, ir.KindNull:
				continue // cannot hold the secret's text
			}
		}
		for _, r := range s.info.Refs {
			if r.Kind == RefInput && secret[r.Name] && r.Range.Start >= p.Value.Start && r.Range.End <= p.Value.End {
				s.errorf(diag.SecretOutput, r.Range, "workflow output `%s` reads secret input `%s`: the run's result stores *** in place of the secret's value", p.Name.Name, r.Name).
					WithHint("a run's result is kept in Redis and shown by status: leave the secret out of it")
				break
			}
		}
	}
}

// lintHeaders reports each entry of an http headers map literal whose name
// looks like a credential and whose value is a constant.
func (s *state) lintHeaders(with *ast.ParamBlock) {
	if with == nil {
		return
	}
	for _, p := range with.Params {
		if p.Name.Name != "headers" || p.Value == nil {
			continue
		}
		checked := s.checked[p.Value]
		if checked == nil {
			continue
		}
		a := checked.NativeRep()
		root := a.Expr()
		if root.Kind() != celast.MapKind {
			continue
		}
		m := newOffsetMap(p.Value)
		for _, ent := range root.AsMap().Entries() {
			e := ent.AsMapEntry()
			if e.Key().Kind() != celast.LiteralKind {
				continue
			}
			name, ok := e.Key().AsLiteral().(types.String)
			if !ok || !credentialHeader(string(name)) || !constantExpr(e.Value()) {
				continue
			}
			if v, ok := literalString(e.Value()); ok && v == "" {
				continue
			}
			// The value's extent: from its first to its last sub-expression.
			start, stop := int32(-1), int32(-1)
			celast.PreOrderVisit(e.Value(), celast.NewExprVisitor(func(x celast.Expr) {
				if r, ok := a.SourceInfo().GetOffsetRange(x.ID()); ok {
					if start < 0 || r.Start < start {
						start = r.Start
					}
					stop = max(stop, r.Stop)
				}
			}))
			s.errorf(diag.CredentialLiteral, m.rng(start, stop), "header %q has a literal value: the compiled workflow, kept in Redis in clear, holds it", string(name)).
				WithHint("declare a secret input (`token: secret`) and write the header from it, e.g. 'Bearer ' + input.token")
		}
	}
}

// credentialHeader reports whether a header name looks like it carries a
// credential: Authorization, Proxy-Authorization, Cookie, or a name
// containing auth, token, secret, password, passwd, credential, session,
// signature or key (Idempotency-Key excepted), in any case.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	if n == "cookie" {
		return true
	}
	for _, w := range []string{"auth", "token", "secret", "password", "passwd", "credential", "session", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return strings.Contains(n, "key") && n != "idempotency-key"
}

// constantExpr reports whether a checked expression names no variable.
func constantExpr(x celast.Expr) bool {
	constant := true
	celast.PreOrderVisit(x, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.IdentKind || e.Kind() == celast.ComprehensionKind {
			constant = false
		}
	}))
	return constant
}

func literalString(x celast.Expr) (string, bool) {
	if x.Kind() != celast.LiteralKind {
		return "", false
	}
	v, ok := x.AsLiteral().(types.String)
	return string(v), ok
}
