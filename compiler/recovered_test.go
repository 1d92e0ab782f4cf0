package compiler

import (
	"strings"
	"testing"
)

// A node whose declaration did not parse (recovered text) but that a join
// analysis reaches must not crash the join-mode fix: examples/lead.wf cut
// after `task manual_review` panicked in joinFix (nil declaration).
func TestRecoveredNodeJoinFix(t *testing.T) {
	res := Compile("cut.wf", []byte(cutLead), Config{})
	var parse, join bool
	for _, d := range res.Diags {
		parse = parse || d.Code == "WF0001"
		join = join || d.Code == "WF4006"
		if d.Code == "WF4006" && strings.Contains(d.Message, "manual_review") && len(d.Fixes) != 0 {
			t.Errorf("a fix for a node without a declaration: %+v", d.Fixes)
		}
	}
	if !parse || !join {
		t.Fatalf("want WF0001 and WF4006, got %v", res.Diags)
	}
}

const cutLead = `workflow lead_qualification {
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

  task standard_sales { run "noop" }
    task manual_review
`
