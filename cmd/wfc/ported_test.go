package main

// The tests of examples/ported: workflows ported from the public examples of
// other engines (Step Functions, Serverless Workflow, Argo Workflows,
// Airflow, Conductor, Temporal, GitHub Actions, Durable Functions). Each
// port is checked with `wfc check` and `wfc build`, and every path its
// original documents is run with `wfc run` — on the embedded server and on
// a real redis-server this test starts — and compared with the result the
// original documents. examples/ported/README.md lists the ports.
//
//	go test ./cmd/wfc -run Ported

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const portedDir = "../../examples/ported"

// A portCase is one documented path of a port: the inputs that take it and
// what the original documents for it.
type portCase struct {
	file   string   // in examples/ported
	name   string   // the path, as the original documents it
	inputs []string // NAME=VALUE; $TMP is a fresh temporary directory
	exec   bool     // needs --allow-exec
	check  func(t *testing.T, r *portRun)
}

// A portRun is the outcome of `wfc run --json FILE`.
type portRun struct {
	args   []string
	code   int
	status portStatus
	stderr string // the progress lines
}

type portStatus struct {
	State       string                    `json:"state"`
	Result      json.RawMessage           `json:"result"`
	Error       string                    `json:"error"`
	FailedNode  string                    `json:"failed_node"`
	Compensated string                    `json:"compensation"`
	Nodes       map[string]portNodeStatus `json:"nodes"`
	Created     time.Time                 `json:"created"`
	Ended       time.Time                 `json:"ended"`
}

type portNodeStatus struct {
	State   string          `json:"state"`
	Output  json.RawMessage `json:"output"`
	Error   string          `json:"error"`
	Code    string          `json:"code"`
	Attempt int             `json:"attempt"`
}

// portWarnings lists, per port, the warnings `wfc check` reports, as
// "CODE first-word-of-the-message" (for WF4004, the node read). Each is
// explained; none is silenced in the port itself.
var portWarnings = map[string][]string{
	// next_state joins the two exclusive branch targets with `join
	// settled`; when it runs one of them ran, so `has(first) ? first :
	// second` is safe: a false positive (README.md, finding 1).
	// The workflow output reads next_state, which is skipped only on the
	// Default path, where DefaultState's `fail` fails the run and the
	// output is never evaluated: a false positive (finding 2).
	"sfn_choice_state.wf": {"WF4004 second_match_state", "WF4004 next_state"},
	// The loop ends only when the status is SUCCEEDED or FAILED, so one of
	// the two branch targets ran; the checker cannot see that the `while`
	// implies the branch (finding 2).
	"sw_monitor_job.wf": {"WF4004 job_failed"},
	// withdraw and deposit are skipped or failed only on paths that end in
	// a `fail` task, so the output (evaluated on success only) always has
	// them (finding 2).
	"temporal_money_transfer.wf": {"WF4004 withdraw", "WF4004 deposit"},
}

// TestPortedCheck runs `wfc check` and `wfc build` on every port: no
// errors, and exactly the warnings listed in portWarnings.
func TestPortedCheck(t *testing.T) {
	files := portedFiles(t)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(portedDir, f)
			code, stdout, stderr := runWFC(t, "check", "--json", path)
			if code != 0 {
				t.Fatalf("wfc check exited %d\n%s%s", code, stdout, stderr)
			}
			var doc struct {
				Files []struct {
					Diagnostics []struct {
						Code     string `json:"code"`
						Severity string `json:"severity"`
						Message  string `json:"message"`
						Span     struct {
							Start struct{ Line int } `json:"start"`
						} `json:"span"`
					} `json:"diagnostics"`
				} `json:"files"`
				Errors int `json:"errors"`
			}
			if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
				t.Fatalf("wfc check --json: %v\n%s", err, stdout)
			}
			if doc.Errors != 0 {
				t.Errorf("%d errors:\n%s", doc.Errors, stdout)
			}
			var got []string
			for _, file := range doc.Files {
				for _, d := range file.Diagnostics {
					word, _, _ := strings.Cut(d.Message, " ")
					got = append(got, d.Code+" "+word)
					t.Logf("%s:%d: %s[%s]: %s", f, d.Span.Start.Line, d.Severity, d.Code, d.Message)
				}
			}
			if want := portWarnings[f]; !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Errorf("diagnostics: got %q, want %q (update portWarnings and README.md)", got, want)
			}
			if code, _, stderr := runWFC(t, "build", "-o", filepath.Join(t.TempDir(), "ir.json"), path); code != 0 {
				t.Errorf("wfc build exited %d\n%s", code, stderr)
			}
		})
	}
}

// TestPortedCoverage checks that every port has test cases and a row in
// the README, and that every case names an existing port.
func TestPortedCoverage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(portedDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]int{}
	for _, c := range portCases {
		cases[c.file]++
	}
	files := portedFiles(t)
	for _, f := range files {
		if cases[f] == 0 {
			t.Errorf("%s has no test case", f)
		}
		if !bytes.Contains(readme, []byte("("+f+")")) {
			t.Errorf("README.md does not link %s", f)
		}
		delete(cases, f)
	}
	for f := range cases {
		t.Errorf("test cases for %s, which is not in %s", f, portedDir)
	}
	if len(files) < 10 {
		t.Errorf("%d ports, want at least 10", len(files))
	}
}

// TestPortedRuns runs every documented path of every port, on the embedded
// server and on a redis-server started for the test. The runs go on
// concurrently (most of their time is spent waiting: back-off, polling,
// compensation), then each case checks its run in a subtest of its own.
func TestPortedRuns(t *testing.T) {
	backends := []struct{ name, url string }{{"embedded", ""}}
	if url, err := startPortRedis(t); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server: %v (CI=true: the real-Redis half of the ported examples may not be skipped)", err)
		}
		t.Logf("skipping the real-Redis runs: %v", err)
	} else {
		backends = append(backends, struct{ name, url string }{"redis", url})
	}
	type outcome struct {
		run *portRun
		err error
	}
	results := make([][]outcome, len(backends))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for bi, b := range backends {
		results[bi] = make([]outcome, len(portCases))
		for ci, c := range portCases {
			url := ""
			if b.url != "" {
				// A database of its own for each run: the in-process
				// workers of a `wfc run` serve every run of the Redis
				// they use (README.md, finding 5).
				url = fmt.Sprintf("%s/%d", b.url, ci+1)
			}
			tmp := t.TempDir()
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				r, err := runPort(c, url, tmp)
				results[bi][ci] = outcome{r, err}
			}()
		}
	}
	wg.Wait()
	for bi, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for ci, c := range portCases {
				t.Run(strings.TrimSuffix(c.file, ".wf")+"/"+c.name, func(t *testing.T) {
					o := results[bi][ci]
					if o.err != nil {
						t.Fatal(o.err)
					}
					r := o.run
					switch r.status.State {
					case "completed":
						if r.code != 0 {
							t.Errorf("completed run: exit code %d, want 0", r.code)
						}
					case "failed":
						if r.code != 1 {
							t.Errorf("failed run: exit code %d, want 1", r.code)
						}
					}
					c.check(t, r)
					if t.Failed() {
						t.Logf("wfc %s\nexit code %d, status %s\nprogress:\n%s", strings.Join(r.args, " "), r.code, mustJSON(r.status), r.stderr)
					}
				})
			}
		})
	}
}

func portedFiles(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(portedDir, "*.wf"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range m {
		files = append(files, filepath.Base(p))
	}
	sort.Strings(files)
	return files
}

// runWFC runs the wfc command in this process, with an environment of its
// own ($WFC_REDIS unset).
func runWFC(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return wfcCommand(args...)
}

func wfcCommand(args ...string) (code int, stdout, stderr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = Run(ctx, env, args)
	return code, out.String(), errb.String()
}

// runPort runs `wfc run --json` on the case's port; $TMP in its inputs is
// replaced with tmp.
func runPort(c portCase, redisURL, tmp string) (*portRun, error) {
	args := []string{"run", "--json"}
	if c.exec {
		args = append(args, "--allow-exec")
	}
	if redisURL != "" {
		args = append(args, "--redis", redisURL)
	}
	for _, in := range c.inputs {
		args = append(args, "--input", strings.ReplaceAll(in, "$TMP", tmp))
	}
	args = append(args, filepath.Join(portedDir, c.file))
	code, stdout, stderr := wfcCommand(args...)
	r := &portRun{args: args, code: code, stderr: stderr}
	if err := json.Unmarshal([]byte(stdout), &r.status); err != nil {
		return nil, fmt.Errorf("wfc %s: exit %d, stdout is not a status: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, err, stdout, stderr)
	}
	return r, nil
}

// startPortRedis starts a redis-server on a free loopback port for the
// test and returns its URL (without a database number).
func startPortRedis(t *testing.T) (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server is not on PATH (Debian package redis-server)")
	}
	dir := t.TempDir()
	var lastErr error
	for try := 0; try < 10; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", dir, "--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--databases", "1024", "--logfile", filepath.Join(dir, fmt.Sprintf("redis-%d.log", port)))
		if err := cmd.Start(); err != nil {
			return "", err
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		stop := func() {
			cmd.Process.Kill()
			<-done
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = waitPing(addr, done); lastErr == nil {
			t.Cleanup(stop)
			return "redis://" + addr, nil
		}
		stop() // most likely the port was taken in between: try another
	}
	return "", fmt.Errorf("could not start redis-server: %v", lastErr)
}

// waitPing waits until the server at addr answers PING, for at most 10 s
// or until it exits.
func waitPing(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited", addr)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer PING", addr)
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// --- what the originals document ---

func (r *portRun) wantState(t *testing.T, state string) {
	t.Helper()
	if r.status.State != state {
		t.Errorf("run state %q (error %q), want %q", r.status.State, r.status.Error, state)
	}
}

// wantResult compares the run's result with want, a JSON object.
func (r *portRun) wantResult(t *testing.T, want string) {
	t.Helper()
	if !jsonEqual(t, r.status.Result, want) {
		t.Errorf("result %s, want %s", r.status.Result, want)
	}
}

// wantField compares one field of the result with want, JSON.
func (r *portRun) wantField(t *testing.T, field, want string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.status.Result, &m); err != nil {
		t.Fatalf("result %s: %v", r.status.Result, err)
	}
	if !jsonEqual(t, m[field], want) {
		t.Errorf("result.%s = %s, want %s", field, m[field], want)
	}
}

// resultString returns a string field of the result.
func (r *portRun) resultString(t *testing.T, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.status.Result, &m); err != nil {
		t.Fatalf("result %s: %v", r.status.Result, err)
	}
	s, _ := m[field].(string)
	return s
}

// wantNodes compares the state of every execution the run has with want
// (exec key -> state): nodes the run never reached are absent.
func (r *portRun) wantNodes(t *testing.T, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for k, n := range r.status.Nodes {
		got[k] = n.State
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("node states:\n got %v\nwant %v", got, want)
	}
}

// wantFailed checks a failed run: the node that failed, its error code and
// a part of the run's error.
func (r *portRun) wantFailed(t *testing.T, node, code, errPart string) {
	t.Helper()
	r.wantState(t, "failed")
	if r.status.FailedNode != node {
		t.Errorf("failed node %q, want %q", r.status.FailedNode, node)
	}
	if got := r.status.Nodes[node].Code; got != code {
		t.Errorf("%s: error code %q, want %q", node, got, code)
	}
	if !strings.Contains(r.status.Error, errPart) {
		t.Errorf("run error %q does not contain %q", r.status.Error, errPart)
	}
}

// wantOrder checks that the progress lines matching each pattern (a
// regexp matched against one line) come in this order.
func (r *portRun) wantOrder(t *testing.T, patterns ...string) {
	t.Helper()
	lines := strings.Split(r.stderr, "\n")
	at := 0
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		found := false
		for ; at < len(lines); at++ {
			if re.MatchString(lines[at]) {
				found, at = true, at+1
				break
			}
		}
		if !found {
			t.Errorf("progress: no line matching %q after the previous ones", p)
			return
		}
	}
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatalf("bad expected JSON %s: %v", want, err)
	}
	return reflect.DeepEqual(a, b)
}

func states(pairs ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// --- the cases ---

var portCases = concatCases(
	sfnCases(), swCases(), argoCases(), airflowCases(), conductorCases(),
	temporalCases(), ghaCases(), durableCases(),
)

func concatCases(lists ...[]portCase) []portCase {
	var all []portCase
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// AWS Step Functions.
func sfnCases() []portCase {
	catch := func(name, errName, wantCaught, fallback, wantResult string) portCase {
		var in []string
		if errName != "" {
			in = []string{"error=" + errName}
		}
		return portCase{file: "sfn_catch_fallbacks.wf", name: name, inputs: in, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantResult(t, fmt.Sprintf(`{"caught": %q, "result": %q}`, wantCaught, wantResult))
			want := states("custom_error_fallback", "skipped", "reserved_type_fallback", "skipped",
				"catch_all_fallback", "skipped", "hello_world", "failed")
			if fallback == "" {
				want["hello_world"] = "completed"
			} else {
				want[fallback] = "completed"
			}
			r.wantNodes(t, want)
		}}
	}
	choice := func(foo, matched, node string) portCase {
		return portCase{file: "sfn_choice_state.wf", name: "foo=" + foo, inputs: []string{"foo=" + foo}, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantResult(t, fmt.Sprintf(`{"matched": %q}`, matched))
			want := states("first_state", "completed", "first_match_state", "skipped",
				"second_match_state", "skipped", "default_state", "skipped", "next_state", "completed")
			want[node] = "completed"
			r.wantNodes(t, want)
		}}
	}
	return []portCase{
		// The asl crate's expected executions: states [HelloWorld], output "".
		catch("no error", "", "", "", ""),
		catch("CustomError", "CustomError", "CustomError", "custom_error_fallback",
			"This is a fallback from a custom lambda function exception"),
		// States.TaskFailed: any other error the task raises.
		catch("States.TaskFailed", "Lambda.Unknown", "Lambda.Unknown", "reserved_type_fallback",
			"This is a fallback from a reserved error code"),
		// States.ALL is reached only by States.Timeout.
		catch("States.Timeout", "timeout", "timeout", "catch_all_fallback",
			"This is a fallback from a reserved error code"),
		choice("1", "OnFirstMatch", "first_match_state"),
		choice("2", "OnSecondMatch", "second_match_state"),
		{file: "sfn_choice_state.wf", name: "Default", inputs: []string{"foo=3"}, check: func(t *testing.T, r *portRun) {
			r.wantFailed(t, "default_state", "DefaultStateError", "No Matches!")
			r.wantNodes(t, states("first_state", "completed", "first_match_state", "skipped",
				"second_match_state", "skipped", "default_state", "failed", "next_state", "skipped"))
		}},
	}
}

// Serverless Workflow.
func swCases() []portCase {
	const applicant = `applicant={"fname": "John", "lname": "Stockton", %s"email": "js@something.com"}`
	app := func(name, age, decision, email string) portCase {
		return portCase{file: "sw_applicant_request.wf", name: name, inputs: []string{fmt.Sprintf(applicant, age)}, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantResult(t, fmt.Sprintf(`{"decision": %q, "email": %q}`, decision, email))
			want := states("check_application", "completed", "start_application", "completed", "reject_application", "skipped")
			if decision == "rejected" {
				want["start_application"], want["reject_application"] = "skipped", "completed"
			}
			r.wantNodes(t, want)
		}}
	}
	provision := func(name, order, handler, exception string) portCase {
		return portCase{file: "sw_provision_orders.wf", name: name, inputs: []string{"order=" + order}, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			want := states("provision_order", "failed", "apply_order", "skipped",
				"missing_id", "skipped", "missing_item", "skipped", "missing_quantity", "skipped")
			want[handler] = "completed"
			if handler == "apply_order" {
				want["provision_order"] = "completed"
				r.wantField(t, "applied", `"123"`)
			}
			r.wantNodes(t, want)
			if got := r.resultString(t, "exception"); !strings.Contains(got, exception) || (exception == "") != (got == "") {
				t.Errorf("exception %q, want one with %q", got, exception)
			}
		}}
	}
	monitor := func(name string, polls int, outcome, interval string) portCase {
		in := []string{`job={"name": "j1"}`, fmt.Sprintf("polls=%d", polls), "outcome=" + outcome}
		if interval != "" {
			in = append(in, "poll_interval="+interval)
		}
		return portCase{file: "sw_monitor_job.wf", name: name, inputs: in, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			report := "succeeded: uid-j1"
			want := states("submit_job", "completed", "job_succeeded", "completed", "job_failed", "skipped")
			if outcome == "FAILED" {
				report = "failed: uid-j1"
				want["job_succeeded"], want["job_failed"] = "skipped", "completed"
			}
			for i := 1; i <= polls; i++ { // wait, then check, every iteration
				want[fmt.Sprintf("wait_for_completion@%d", i)] = "completed"
				want[fmt.Sprintf("get_job_status@%d", i)] = "completed"
			}
			r.wantNodes(t, want)
			r.wantResult(t, fmt.Sprintf(`{"polls": %d, "report": %q}`, polls, report))
			r.wantOrder(t, `^  wait_for_completion@1 +completed`, `^  get_job_status@1 +completed`)
			if interval == "" { // the documented PT5S
				if d := r.status.Ended.Sub(r.status.Created); d < 5*time.Second {
					t.Errorf("the run took %v; it waits 5s before checking", d)
				}
			}
		}}
	}
	return []portCase{
		{file: "sw_greeting.wf", name: "John", inputs: []string{`person={"name": "John"}`}, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantResult(t, `{"greeting": "Welcome to Serverless Workflow, John!"}`)
		}},
		app("age 22 starts the application", `"age": 22, `, "started", ""),
		app("age 15 is rejected", `"age": 15, `, "rejected", "js@something.com"),
		app("no age: default condition rejects", ``, "rejected", "js@something.com"),
		provision("documented input: missing id", `{"id": "", "item": "laptop", "quantity": "10"}`, "missing_id", "Missing order id"),
		provision("missing item", `{"id": "123", "item": "", "quantity": "10"}`, "missing_item", "Missing order item"),
		provision("missing quantity", `{"id": "123", "item": "laptop", "quantity": ""}`, "missing_quantity", "Missing order quantity"),
		provision("no error: ApplyOrder", `{"id": "123", "item": "laptop", "quantity": "10"}`, "apply_order", ""),
		monitor("SUCCEEDED at the first check, after PT5S", 1, "SUCCEEDED", ""),
		monitor("SUCCEEDED after 3 checks", 3, "SUCCEEDED", "10ms"),
		monitor("FAILED after 2 checks", 2, "FAILED", "10ms"),
	}
}

// Argo Workflows.
func argoCases() []portCase {
	flip := func(coin string) portCase {
		return portCase{file: "argo_coinflip.wf", name: coin, inputs: []string{"coin=" + coin}, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantResult(t, fmt.Sprintf(`{"stdout": "it was %s"}`, coin))
			want := states("flip_coin", "completed", "heads", "skipped", "tails", "skipped")
			want[coin] = "completed"
			r.wantNodes(t, want)
		}}
	}
	return []portCase{
		{file: "argo_dag_diamond.wf", name: "diamond", check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantResult(t, `{"echoed": ["foo-bar-longname-A", "foo-bar-longname-B", "foo-bar-longname-C", "foo-bar-longname-D"]}`)
			// D starts only once both B and C are done.
			r.wantOrder(t, `^  b +completed`, `^  d +queued`)
			r.wantOrder(t, `^  c +completed`, `^  d +queued`)
			r.wantOrder(t, `^  a +completed`, `^  b +queued`)
		}},
		flip("heads"),
		flip("tails"),
		{file: "argo_enhanced_depends.wf", name: "C fails", check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantNodes(t, states("a", "completed", "b", "completed", "c", "failed",
				"should_execute_1", "completed", "should_execute_2", "completed",
				"should_not_execute", "skipped", "should_execute_3", "completed"))
		}},
		{file: "argo_retry_backoff.wf", name: "succeeds at once", exec: true,
			inputs: []string{"counter=$TMP/count", "fail_times=0"}, check: func(t *testing.T, r *portRun) {
				r.wantState(t, "completed")
				r.wantResult(t, `{"stdout": "attempt 1\n"}`)
			}},
		{file: "argo_retry_backoff.wf", name: "fails twice then succeeds", exec: true,
			inputs: []string{"counter=$TMP/count", "fail_times=2"}, check: func(t *testing.T, r *portRun) {
				r.wantState(t, "completed")
				r.wantResult(t, `{"stdout": "attempt 3\n"}`)
				if a := r.status.Nodes["retry_backoff"].Attempt; a != 3 {
					t.Errorf("attempt %d, want 3", a)
				}
				r.wantOrder(t, `^  retry_backoff +retrying`, `^  retry_backoff +completed`)
				// backoff: 1s before the second attempt, 2s before the third
				if d := r.status.Ended.Sub(r.status.Created); d < 3*time.Second {
					t.Errorf("the run took %v; the back-off waits 1s and 2s", d)
				}
			}},
	}
}

// Apache Airflow.
func airflowCases() []portCase {
	var cs []portCase
	for _, choice := range []string{"a", "b", "c", "d"} {
		cs = append(cs, portCase{file: "airflow_branch_operator.wf", name: "branch_" + choice, inputs: []string{"choice=" + choice},
			check: func(t *testing.T, r *portRun) {
				r.wantState(t, "completed")
				want := states("run_this_first", "completed", "branching", "completed", "join_tasks", "completed")
				for _, o := range []string{"a", "b", "c", "d"} {
					s := "skipped"
					if o == choice {
						s = "completed"
					}
					want["branch_"+o], want["follow_"+o] = s, s
				}
				r.wantNodes(t, want)
			}})
	}
	cs = append(cs, portCase{file: "airflow_short_circuit.wf", name: "short circuits", check: func(t *testing.T, r *portRun) {
		r.wantState(t, "completed")
		r.wantNodes(t, states(
			"condition_is_true", "completed", "true_1", "completed", "true_2", "completed",
			"condition_is_false", "completed", "false_1", "skipped", "false_2", "skipped",
			"task_1", "completed", "task_2", "completed", "short_circuit", "completed",
			"task_3", "completed", "task_4", "skipped", "task_5", "completed",
			"task_6", "skipped", "task_7", "completed"))
	}})
	return cs
}

// Conductor.
func conductorCases() []portCase {
	ship := func(service, with string) portCase {
		return portCase{file: "conductor_switch_shipping.wf", name: service, inputs: []string{"service=" + service}, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantResult(t, fmt.Sprintf(`{"selected_case": %q, "shipped_with": %q}`, service, with))
			want := states("switch_ref", "completed", "ship_via_fedex", "skipped", "ship_via_ups", "skipped", "default_case", "skipped")
			want[map[string]string{"fedex": "ship_via_fedex", "ups": "ship_via_ups", "default": "default_case"}[with]] = "completed"
			r.wantNodes(t, want)
		}}
	}
	stars := func(name string, in []string, pages int) portCase {
		return portCase{file: "conductor_do_while.wf", name: name, inputs: in, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			list := make([]string, pages)
			for i := range list {
				list[i] = strconv.Itoa(i + 1)
			}
			r.wantResult(t, fmt.Sprintf(`{"iteration": %d, "last_page": %d, "pages_fetched": [%s],
				"last_url": "https://api.github.com/repos/ntflix/conductor/stargazers?page=%d&per_page=100"}`,
				pages, pages, strings.Join(list, ", "), pages))
			if n := len(r.status.Nodes); n != pages {
				t.Errorf("%d executions, want one per iteration: %d", n, pages)
			}
		}}
	}
	return []portCase{
		ship("fedex", "fedex"),
		ship("ups", "ups"),
		ship("dhl", "default"),
		{file: "conductor_fork_join.wf", name: "join on email and sms",
			inputs: []string{"email=test@example.com", "phone=+1-425-555-0189", "url=https://example.com/notify", "http_latency=1s"},
			check: func(t *testing.T, r *portRun) {
				r.wantState(t, "completed")
				r.wantResult(t, `{"notification_join": {
					"email_notification_ref": {"email_sent_to": "test@example.com"},
					"sms_notification_ref": {"sms_sent_to": "+1-425-555-0189"}}}`)
				// The join goes on while the HTTP notification still runs.
				r.wantOrder(t, `^  notification_join_ref +completed`, `^  http_notification_ref +completed`)
			}},
		stars("4000 stargazers: 40 pages", nil, 40),
		stars("250 stargazers: 3 pages", []string{"stargazers=250"}, 3),
	}
}

// Temporal.
func temporalCases() []portCase {
	transfer := func(src, dst, amount string) []string {
		return []string{"source_account=" + src, "target_account=" + dst, "amount=" + amount, "reference_id=12345"}
	}
	return []portCase{
		{file: "temporal_saga.wf", name: "StepWithError: compensations in reverse",
			inputs: []string{"amount=1.0", "from_account=001-001", "to_account=002-002", "reference_id=1234"},
			check: func(t *testing.T, r *portRun) {
				r.wantFailed(t, "step_with_error", "fail", "some error")
				r.wantNodes(t, states("withdraw", "completed", "deposit", "completed", "step_with_error", "failed"))
				if a := r.status.Nodes["step_with_error"].Attempt; a != 3 {
					t.Errorf("step_with_error: attempt %d, want 3 (MaximumAttempts)", a)
				}
				if r.status.Compensated != "done" {
					t.Errorf("compensation %q, want done", r.status.Compensated)
				}
				r.wantOrder(t, `^  step_with_error +failed`,
					`^  deposit +compensating`, `^  deposit +compensated`,
					`^  withdraw +compensating`, `^  withdraw +compensated`)
			}},
		{file: "temporal_money_transfer.wf", name: "transfer complete", exec: true,
			inputs: transfer("85-150", "43-812", "250"), check: func(t *testing.T, r *portRun) {
				r.wantState(t, "completed")
				got := r.resultString(t, "result")
				if !regexp.MustCompile(`^Transfer complete \(transaction IDs: W\d{10}, D\d{10}\)$`).MatchString(got) {
					t.Errorf("result %q", got)
				}
				r.wantNodes(t, states("check_amount", "completed", "invalid_amount", "skipped", "withdraw", "completed",
					"deposit", "completed", "refund", "skipped", "deposit_failed", "skipped", "refund_failed", "skipped"))
			}},
		{file: "temporal_money_transfer.wf", name: "amount 0: InvalidAmountError", exec: true,
			inputs: transfer("85-150", "43-812", "0"), check: func(t *testing.T, r *portRun) {
				r.wantFailed(t, "invalid_amount", "InvalidAmountError", "Transfer amount must be greater than zero")
				if _, ran := r.status.Nodes["withdraw"]; ran && r.status.Nodes["withdraw"].State != "skipped" {
					t.Errorf("withdraw %s; no activity may run", r.status.Nodes["withdraw"].State)
				}
			}},
		{file: "temporal_money_transfer.wf", name: "InsufficientFundsError is not retried", exec: true,
			inputs: transfer("85-150", "43-812", "5000"), check: func(t *testing.T, r *portRun) {
				r.wantFailed(t, "withdraw", "exec.4", "Insufficient Funds")
				if a := r.status.Nodes["withdraw"].Attempt; a > 1 {
					t.Errorf("withdraw: attempt %d; a non-retryable error is tried once", a)
				}
			}},
		{file: "temporal_money_transfer.wf", name: "InvalidAccountError on withdraw", exec: true,
			inputs: transfer("99-999", "43-812", "250"), check: func(t *testing.T, r *portRun) {
				r.wantFailed(t, "withdraw", "exec.3", "Account number supplied is invalid")
			}},
		{file: "temporal_money_transfer.wf", name: "deposit fails: refund", exec: true,
			inputs: transfer("85-150", "43-999", "250"), check: func(t *testing.T, r *portRun) {
				r.wantFailed(t, "deposit_failed", "exec.3",
					"Deposit: failed to deposit money into 43-999: Money returned to 85-150: ")
				if !strings.Contains(r.status.Error, "Account number supplied is invalid") {
					t.Errorf("run error %q does not carry the deposit's error", r.status.Error)
				}
				r.wantNodes(t, states("check_amount", "completed", "invalid_amount", "skipped", "withdraw", "completed",
					"deposit", "failed", "refund", "completed", "deposit_failed", "failed", "refund_failed", "skipped"))
				if a := r.status.Nodes["deposit"].Attempt; a > 1 {
					t.Errorf("deposit: attempt %d; InvalidAccountError is not retried", a)
				}
			}},
	}
}

// GitHub Actions.
func ghaCases() []portCase {
	needs := func(failing string, want map[string]string) portCase {
		name := "all succeed"
		if failing != "" {
			name = failing + " fails"
		}
		return portCase{file: "gha_needs.wf", name: name, exec: true, inputs: []string{"failing_job=" + failing}, check: func(t *testing.T, r *portRun) {
			if failing == "" {
				r.wantState(t, "completed")
				r.wantOrder(t, `^  job1 +completed`, `^  job2 +completed`, `^  job3 +completed`)
			} else {
				r.wantFailed(t, failing, "exec.1", "exited with status 1")
			}
			r.wantNodes(t, want)
		}}
	}
	always := func(failing, state, j1, j2, j3 string) portCase {
		name := "all succeed"
		if failing != "" {
			name = failing + " fails"
		}
		return portCase{file: "gha_needs_always.wf", name: name, exec: true, inputs: []string{"failing_job=" + failing}, check: func(t *testing.T, r *portRun) {
			r.wantState(t, state)
			if state == "completed" {
				r.wantResult(t, fmt.Sprintf(`{"job1": %q, "job2": %q, "job3": %q}`, j1, j2, j3))
				// job3 runs after job1 and job2 are done, whatever their outcome.
				r.wantOrder(t, `^  job2 +(completed|failed|skipped)`, `^  job3 +queued`)
			} else {
				r.wantFailed(t, failing, "exec.1", "exited with status 1")
			}
		}}
	}
	return []portCase{
		needs("", states("job1", "completed", "job2", "completed", "job3", "completed")),
		// The jobs that need a failed job do not start (GitHub: skipped).
		needs("job1", states("job1", "failed")),
		needs("job2", states("job1", "completed", "job2", "failed")),
		needs("job3", states("job1", "completed", "job2", "completed", "job3", "failed")),
		always("", "completed", "success", "success", "success"),
		always("job1", "completed", "failure", "skipped", "success"),
		always("job2", "completed", "success", "failure", "success"),
		always("job3", "failed", "", "", ""),
	}
}

// Azure Durable Functions.
func durableCases() []portCase {
	const files = `files={"/home/site/wwwroot": [
		{"path": "/home/site/wwwroot/index.html", "bytes": 1024},
		{"path": "/home/site/wwwroot/app.js", "bytes": 2048},
		{"path": "/home/site/wwwroot/img/logo.png", "bytes": 512}],
		"/data": []}`
	backup := func(name string, in []string, total int, uploaded []string) portCase {
		return portCase{file: "durable_fan_out_fan_in.wf", name: name, inputs: in, check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantField(t, "total_bytes", strconv.Itoa(total))
			var res struct{ Uploaded []string }
			if err := json.Unmarshal(r.status.Result, &res); err != nil {
				t.Fatal(err)
			}
			sort.Strings(res.Uploaded) // for_each promises no order (README.md, finding 4)
			want := append([]string(nil), uploaded...)
			sort.Strings(want)
			if !reflect.DeepEqual(res.Uploaded, want) && (len(res.Uploaded) > 0 || len(want) > 0) {
				t.Errorf("uploaded %q, want %q in any order", res.Uploaded, want)
			}
		}}
	}
	return []portCase{
		{file: "durable_function_chaining.wf", name: "hello sequence", check: func(t *testing.T, r *portRun) {
			r.wantState(t, "completed")
			r.wantResult(t, `{"outputs": ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]}`)
			r.wantOrder(t, `^  say_hello_tokyo +completed`, `^  say_hello_seattle +queued`,
				`^  say_hello_seattle +completed`, `^  say_hello_london +queued`)
		}},
		backup("default directory: 3 files", []string{files}, 3584,
			[]string{"/home/site/wwwroot/index.html", "/home/site/wwwroot/app.js", "/home/site/wwwroot/img/logo.png"}),
		backup("empty directory", []string{files, "root_directory= /data "}, 0, nil),
	}
}
