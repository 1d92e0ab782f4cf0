package tools

import (
	"testing"
	"time"
)

// TestJQHostile: programs that would run for ever or build huge values
// end at the jq time bound with a timeout the model can read.
func TestJQHostile(t *testing.T) {
	pl := toolset(t, Config{Limits: Limits{JQTimeout: 200 * time.Millisecond}}, Env{})[ExecutePipeline]
	for _, p := range []string{
		`[range(1e9)] | length`,
		`reduce range(1e9) as $i (\"\"; . + \"abcdefghij\") | length`,
		`[limit(1e9; repeat(\"abcdefgh\"))] | length`,
		`def f: [f]; f`,
		`[paths] | length`,
	} {
		start := time.Now()
		_, err := runPipeline(t, pl, `{"input":{"a":[1,2,{"b":3}]},"steps":[{"step":"jq_transform","program":"`+p+`"}]}`)
		if p == `[paths] | length` {
			if err != nil {
				t.Errorf("%s: %v", p, err)
			}
			continue
		}
		wantErr(t, err, "", "")
		if e := asToolError(err); e.Code != CodeTimeout && e.Code != CodeFailed {
			t.Errorf("%s: %v", p, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s took %v", p, d)
		}
	}
}
