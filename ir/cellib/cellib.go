package cellib

import (
	"net/url"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// Options are the libraries every wf expression may use (docs/language.md
// §6.1). Callers add their own variables and limits.
func Options() []cel.EnvOption {
	return []cel.EnvOption{ext.Strings(), ext.Math(), urlLib()}
}

// urlLib declares url.pathEscape and url.queryEscape: a template splices
// raw text, so a value put into a URL needs escaping (Go's url.PathEscape
// and url.QueryEscape).
func urlLib() cel.EnvOption {
	return cel.Lib(urlLibrary{})
}

type urlLibrary struct{}

func (urlLibrary) LibraryName() string { return "wfc.url" }

func (urlLibrary) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("url.pathEscape",
			cel.Overload("url_pathEscape_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(stringFunc(url.PathEscape)))),
		cel.Function("url.queryEscape",
			cel.Overload("url_queryEscape_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(stringFunc(url.QueryEscape)))),
	}
}

func (urlLibrary) ProgramOptions() []cel.ProgramOption { return nil }

func stringFunc(f func(string) string) func(ref.Val) ref.Val {
	return func(v ref.Val) ref.Val {
		s, ok := v.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		return types.String(f(string(s)))
	}
}
