package lang

import (
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/ast"
)

const leadWF = `workflow lead_qualification {
  version "1.0"
  deadline 72h

  input {
    lead_id: string
  }

  output {
    route = has(qualify.output) ? "agent" : "rules"
  }

  handler "crm.lookup" {
    config { lead_id: string }
    output { name: string  employees: int  revenue: number }
  }

  task enrich {
    run "crm.lookup"
    with { lead_id = input.lead_id }
    retry { attempts 3  backoff exponential  delay 1s }
    timeout 30s
  }

  task score after enrich {
    run "cel"
    with { score = enrich.output.employees > 500 ? 90 : 40 }
    branch {
      when output.score >= 80 && enrich.output.revenue > 100000.0 => qualify
      else => nurture_campaign
    }
  }

  agent qualify {
    model "gpt-4o"
    prompt "Route lead {{ enrich.output.name }} ({{ enrich.output.revenue }})"
    routes enterprise_sales, standard_sales
    default => manual_review
  }

  human enterprise_sales {
    approvers ["sales-manager@example.com"]
    timeout 48h
    on_timeout reject
    on_reject => manual_review
  }

  task standard_sales   { run "noop" }
  task manual_review join settled { run "noop" }
  task nurture_campaign { run "noop" }
}
`

func TestParseLead(t *testing.T) {
	f, _, diags := ParseString("lead.wf", leadWF)
	if len(diags) > 0 {
		t.Fatalf("diags: %v", diags)
	}
	w := f.Workflow()
	if w == nil || w.Name.Name != "lead_qualification" {
		t.Fatalf("workflow: %+v", w)
	}
	var nodes []string
	for _, it := range w.Items {
		if n, ok := it.(*ast.NodeDecl); ok {
			nodes = append(nodes, n.Kind.Name+" "+n.Name.Name)
			if leadWF[n.Start:n.Start+len(n.Kind.Name)] != n.Kind.Name || leadWF[n.End-1] != '}' {
				t.Errorf("node %s range %v = %q", n.Name.Name, n.Range, leadWF[n.Start:n.End])
			}
		}
	}
	want := "task enrich,task score,agent qualify,human enterprise_sales,task standard_sales,task manual_review,task nurture_campaign"
	if got := strings.Join(nodes, ","); got != want {
		t.Errorf("nodes = %s", got)
	}
}

func TestExprExtent(t *testing.T) {
	src := `workflow w { task a { when input.x > 0 && f(1, [2]) timeout 3s  with { u = "x{{ input.id }}y"  v = a.b[0] } } }`
	f, _, diags := ParseString("x.wf", src)
	if len(diags) > 0 {
		t.Fatalf("diags: %v", diags)
	}
	n := f.Workflow().Items[0].(*ast.NodeDecl)
	c := n.Items[0].(*ast.Cond)
	if c.Expr.Text != "input.x > 0 && f(1, [2])" {
		t.Errorf("expr = %q", c.Expr.Text)
	}
	with := n.Items[2].(*ast.ParamBlock)
	u := with.Params[0].Value
	if u.Str == nil || len(u.Str.Template) != 3 || u.Str.Template[1].Expr.Text != "input.id" {
		t.Fatalf("template = %+v", u.Str)
	}
	if got := src[u.Str.Template[1].Expr.Start:u.Str.Template[1].Expr.End]; got != "input.id" {
		t.Errorf("template expr range = %q", got)
	}
	if with.Params[1].Value.Text != "a.b[0]" {
		t.Errorf("v = %q", with.Params[1].Value.Text)
	}
}

func TestRecovery(t *testing.T) {
	src := `workflow w {
  task a { run "noop" timeout }
  task b after a { run "noop" }
  task c after b { run "noop" when }
  task d after c { run "noop" }
}
`
	f, _, diags := ParseString("r.wf", src)
	if len(diags) != 2 {
		t.Fatalf("want 2 diags, got %v", diags)
	}
	if diags[0].Span.Start.Line != 2 || diags[1].Span.Start.Line != 4 {
		t.Errorf("lines: %v", diags)
	}
	var names []string
	for _, it := range f.Workflow().Items {
		if n, ok := it.(*ast.NodeDecl); ok {
			names = append(names, n.Name.Name)
		}
	}
	if strings.Join(names, ",") != "a,b,c,d" {
		t.Errorf("nodes kept: %v", names)
	}
}
