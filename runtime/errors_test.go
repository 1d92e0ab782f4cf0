package runtime

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// registerCoded registers "coded": it fails attempts 1..times with error
// code `code` (retryable), then outputs {attempt}.
func registerCoded(v *env) {
	v.reg.RegisterFunc("coded", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		var c struct {
			Code  string `json:"code"`
			Times int    `json:"times"`
		}
		json.Unmarshal(req.Config, &c)
		if req.Attempt <= c.Times {
			return nil, handlers.Errorf(c.Code, true, "attempt %d: %s", req.Attempt, c.Code)
		}
		return json.Marshal(map[string]int{"attempt": req.Attempt})
	})
}

// TestErrorRoutes: a failure goes to the on_error route its code matches
// (exact, prefix pattern), else to the catch-all, else fails the run; the
// target reads x.error (issue #13, item 4).
func TestErrorRoutes(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		routes := func(code string, catchAll bool) *ir.Workflow {
			er := []ir.ErrorRoute{{Codes: []string{"Card.Declined"}, Targets: []string{"declined"}}, {Codes: []string{"http.4*", "Fraud"}, Targets: []string{"manual"}}}
			on := []string{"declined", "manual"}
			alert := when("false") // without the catch-all, alert is an entry node: never run it
			if catchAll {
				er = append(er, ir.ErrorRoute{Targets: []string{"alert"}})
				on = append(on, "alert")
				alert = func(*nodeSpec) {}
			}
			return build(t, wfSpec{
				outputs: []ir.Output{
					output("route", "has(declined.output) ? 'declined' : has(manual.output) ? 'manual' : has(alert.output) ? 'alert' : 'none'"),
					output("seen", "has(declined.output) ? declined.output.code : has(manual.output) ? manual.output.code : has(alert.output) ? alert.output.code : ''"),
				},
				nodes: []*nodeSpec{
					task("charge", "fail", with("code", konst(`"`+code+`"`)), with("message", konst(`"no: `+code+`"`)),
						func(s *nodeSpec) { s.n.OnError = on; s.n.ErrorRoutes = er }),
					task("declined", "cel", with("code", cexpr("charge.error.code")), with("msg", cexpr("charge.error.message"))),
					task("manual", "cel", with("code", cexpr("charge.error.code"))),
					task("alert", "cel", with("code", cexpr("charge.error.code")), alert),
				},
			})
		}
		for _, c := range []struct {
			code     string
			catchAll bool
			want     string // result, or "failed"
		}{
			{"Card.Declined", true, `{"route":"declined","seen":"Card.Declined"}`},
			{"http.404", true, `{"route":"manual","seen":"http.404"}`},
			{"Fraud", false, `{"route":"manual","seen":"Fraud"}`},
			{"Other", true, `{"route":"alert","seen":"Other"}`},
			{"Other", false, "failed"},
		} {
			st := v.run(routes(c.code, c.catchAll), nil)
			if c.want == "failed" {
				if st.State != RunFailed || st.Error != "no: Other" || st.Nodes["charge"].Code != "Other" {
					t.Errorf("%s without catch-all: %s %q (code %q)", c.code, st.State, st.Error, st.Nodes["charge"].Code)
				}
				continue
			}
			if st.State != RunCompleted || string(st.Result) != c.want {
				t.Errorf("%s: %s %s %s", c.code, st.State, st.Result, st.Error)
			}
			if n := st.Nodes["charge"]; n.State != NodeFailed || n.Code != c.code || n.Error != "no: "+c.code {
				t.Errorf("%s: charge %s %q code %q", c.code, n.State, n.Error, n.Code)
			}
		}
	})
}

// TestRetryByCode: retry { on [...] } retries only those codes, except
// [...] all others; the built-in codes (timeout) take part.
func TestRetryByCode(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		registerCoded(v)
		v.worker()
		run := func(code string, r *ir.Retry) *Status {
			w := build(t, wfSpec{
				outputs: []ir.Output{output("attempt", "has(a.output) ? a.output.attempt : 0")},
				nodes: []*nodeSpec{task("a", "coded", with("code", konst(`"`+code+`"`)), with("times", konst("2")),
					func(s *nodeSpec) { s.n.Retry = r })},
			})
			return v.run(w, nil)
		}
		for _, c := range []struct {
			code string
			r    ir.Retry
			ok   bool
		}{
			{"http.503", ir.Retry{Attempts: 3, Backoff: ir.BackoffFixed, DelayMS: 1, On: []string{"http.5*"}}, true},
			{"http.404", ir.Retry{Attempts: 3, Backoff: ir.BackoffFixed, DelayMS: 1, On: []string{"http.5*"}}, false},
			{"Busy", ir.Retry{Attempts: 3, Backoff: ir.BackoffFixed, DelayMS: 1, Except: []string{"Order.*"}}, true},
			{"Order.Bad", ir.Retry{Attempts: 3, Backoff: ir.BackoffFixed, DelayMS: 1, Except: []string{"Order.*"}}, false},
		} {
			st := run(c.code, &c.r)
			if c.ok && (st.State != RunCompleted || string(st.Result) != `{"attempt":3}`) {
				t.Errorf("%s: %s %s %s, want a success on attempt 3", c.code, st.State, st.Result, st.Error)
			}
			if !c.ok && (st.State != RunFailed || st.Error != "attempt 1: "+c.code) {
				t.Errorf("%s: %s %q, want a failure on attempt 1 (not retried)", c.code, st.State, st.Error)
			}
		}
	})
}
