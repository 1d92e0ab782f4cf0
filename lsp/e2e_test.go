package lsp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/lang/source"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// wfcBinary builds the real wfc command once per test run.
func wfcBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "wfc-lsp-test-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "wfc")
		out, err := exec.Command("go", "build", "-o", buildBin, "github.com/wfc-lang/wfc/cmd/wfc").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// lockedBuffer records everything the server writes to stdout.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// procClient drives a wfc lsp process.
type procClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	raw    *lockedBuffer
	stderr *lockedBuffer
	msgs   chan message
	exited chan struct{}
	id     int
	queue  []message // notifications read while waiting for a response
}

func startProc(t *testing.T, args ...string) *procClient {
	bin := wfcBinary(t)
	cmd := exec.Command(bin, append([]string{"lsp"}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	raw := &lockedBuffer{}
	stderr := &lockedBuffer{}
	cmd.Stdout = io.MultiWriter(pw, raw)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &procClient{t: t, cmd: cmd, in: in, raw: raw, stderr: stderr, msgs: make(chan message, 100), exited: make(chan struct{})}
	go func() {
		st := newStream(pr, io.Discard)
		for {
			body, err := st.read()
			if err != nil {
				close(p.msgs)
				return
			}
			var m message
			if err := json.Unmarshal(body, &m); err != nil {
				t.Errorf("not JSON on stdout: %s", body)
			}
			p.msgs <- m
		}
	}()
	go func() {
		cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *procClient) send(v any) {
	p.t.Helper()
	body, _ := json.Marshal(v)
	if _, err := fmt.Fprintf(p.in, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

func (p *procClient) next(timeout time.Duration) (message, bool) {
	if len(p.queue) > 0 {
		m := p.queue[0]
		p.queue = p.queue[1:]
		return m, true
	}
	select {
	case m, ok := <-p.msgs:
		return m, ok
	case <-time.After(timeout):
		p.t.Fatalf("timed out waiting for the server; stderr:\n%s", p.stderr.Bytes())
		return message{}, false
	}
}

func (p *procClient) call(method string, params any, result any) {
	p.t.Helper()
	p.id++
	id := p.id
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	var held []message
	for {
		m, ok := p.next(30 * time.Second)
		if !ok {
			p.t.Fatalf("%s: server closed stdout; stderr:\n%s", method, p.stderr.Bytes())
		}
		if m.Method == "" && string(m.ID) == strconv.Itoa(id) {
			p.queue = append(held, p.queue...)
			if m.Error != nil {
				p.t.Fatalf("%s: %v", method, m.Error)
			}
			if result != nil {
				if err := json.Unmarshal(m.Result, result); err != nil {
					p.t.Fatalf("%s: %v: %s", method, err, m.Result)
				}
			}
			return
		}
		held = append(held, m)
	}
}

func (p *procClient) notify(method string, params any) {
	p.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// diagnostics waits for a publishDiagnostics of version.
func (p *procClient) diagnostics(version int) testPublish {
	p.t.Helper()
	for {
		m, ok := p.next(30 * time.Second)
		if !ok {
			p.t.Fatal("server closed stdout")
		}
		if m.Method == string(protocol.ServerTextDocumentPublishDiagnostics) {
			var pub testPublish
			json.Unmarshal(m.Params, &pub)
			if pub.Version != nil && *pub.Version == version {
				return pub
			}
		}
	}
}

// checkFrames verifies that out is nothing but well-formed LSP frames.
func checkFrames(t *testing.T, out []byte) int {
	t.Helper()
	n := 0
	for len(out) > 0 {
		const prefix = "Content-Length: "
		if !bytes.HasPrefix(out, []byte(prefix)) {
			t.Fatalf("stdout has bytes that are not a frame: %q", out[:min(len(out), 80)])
		}
		end := bytes.Index(out, []byte("\r\n\r\n"))
		if end < 0 {
			t.Fatalf("unterminated header: %q", out)
		}
		length, err := strconv.Atoi(string(out[len(prefix):end]))
		if err != nil {
			t.Fatalf("bad header %q", out[:end])
		}
		body := out[end+4:]
		if len(body) < length {
			t.Fatalf("frame of %d bytes has only %d", length, len(body))
		}
		if !json.Valid(body[:length]) {
			t.Fatalf("frame is not JSON: %q", body[:length])
		}
		out = body[length:]
		n++
	}
	return n
}

// TestEndToEnd runs the real wfc binary as `wfc lsp --stdio` and goes
// through a whole session, checking that stdout carries frames only and
// that the diagnostics are those of `wfc check --json`.
func TestEndToEnd(t *testing.T) {
	bin := wfcBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "flow.wf")
	src := strings.Replace(lead, `run "cel"`, `run "cell"`, 1) // one error, with a fix
	os.WriteFile(path, []byte(src), 0o644)
	uri := pathToURI(path)

	p := startProc(t, "--stdio", "--clientProcessId="+strconv.Itoa(os.Getpid()), "--log-level=debug")
	var init map[string]any
	p.call("initialize", map[string]any{"processId": os.Getpid(), "rootUri": pathToURI(dir), "capabilities": map[string]any{
		"textDocument": map[string]any{"documentSymbol": map[string]any{"hierarchicalDocumentSymbolSupport": true}},
	}}, &init)
	if init["capabilities"] == nil {
		t.Fatalf("initialize = %v", init)
	}
	p.notify("initialized", map[string]any{})
	p.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{"uri": uri, "languageId": "wf", "version": 1, "text": src}})
	pub := p.diagnostics(1)

	// The same diagnostics as wfc check --json.
	out, _ := exec.Command(bin, "check", "--json", path).Output()
	var check struct {
		Files []struct {
			Diagnostics []struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Span    struct {
					Start struct{ Line, Col int } `json:"start"`
				} `json:"span"`
			} `json:"diagnostics"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &check); err != nil || len(check.Files) != 1 {
		t.Fatalf("wfc check --json: %v\n%s", err, out)
	}
	want := check.Files[0].Diagnostics
	if len(want) == 0 || len(pub.Diagnostics) != len(want) {
		t.Fatalf("lsp diagnostics %v, check %v", pub.Diagnostics, want)
	}
	lines := strings.Split(src, "\n")
	for i, w := range want {
		g := pub.Diagnostics[i]
		char := utf16Len([]byte(lines[w.Span.Start.Line-1][:w.Span.Start.Col-1]))
		if g.Code != w.Code || !strings.HasPrefix(g.Message, w.Message) || int(g.Range.Start.Line) != w.Span.Start.Line-1 || int(g.Range.Start.Character) != char {
			t.Errorf("diagnostic %d: lsp %s %d:%d %q, check %s %d:%d %q", i, g.Code, g.Range.Start.Line, g.Range.Start.Character, g.Message,
				w.Code, w.Span.Start.Line, w.Span.Start.Col, w.Message)
		}
	}

	// Fix it with an incremental change.
	k := strings.Index(src, `"cell"`)
	start := NewMapper(sourceFile(src)).Position(k + 1)
	p.notify("textDocument/didChange", map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": 2},
		"contentChanges": []any{map[string]any{"range": protocol.Range{Start: start, End: protocol.Position{Line: start.Line, Character: start.Character + 4}}, "text": "cel"}},
	})
	if pub := p.diagnostics(2); len(pub.Diagnostics) != 0 {
		t.Errorf("after the fix: %v", pub.Diagnostics)
	}
	text := lead

	var comp struct {
		Items []completionItem `json:"items"`
	}
	p.call("textDocument/completion", tdp(uri, at(t, text, "employees > 500", 0, 0)), &comp)
	if !hasLabel(comp.Items, "employees") || !hasLabel(comp.Items, "revenue") {
		t.Errorf("completion = %v", comp.Items)
	}
	var hover struct {
		Contents protocol.MarkupContent `json:"contents"`
	}
	p.call("textDocument/hover", tdp(uri, at(t, text, "after enrich", 0, 7)), &hover)
	if !strings.Contains(hover.Contents.Value, "task enrich") {
		t.Errorf("hover = %q", hover.Contents.Value)
	}
	var defs []protocol.Location
	p.call("textDocument/definition", tdp(uri, at(t, text, "enrich.output.name", 0, 1)), &defs)
	if len(defs) != 1 || defs[0].Range.Start != at(t, text, "task enrich", 0, 5) {
		t.Errorf("definition = %v", defs)
	}
	var refs []protocol.Location
	params := tdp(uri, at(t, text, "task enrich", 0, 5))
	params["context"] = map[string]any{"includeDeclaration": true}
	p.call("textDocument/references", params, &refs)
	if len(refs) != 6 {
		t.Errorf("references = %d, want 6", len(refs))
	}
	params = tdp(uri, at(t, text, "task enrich", 0, 5))
	params["newName"] = "lookup"
	var edit struct {
		Changes map[string][]protocol.TextEdit `json:"changes"`
	}
	p.call("textDocument/rename", params, &edit)
	if len(edit.Changes[uri]) != 6 {
		t.Errorf("rename edits = %v", edit.Changes)
	}
	// Unindent the document, then format it.
	text = strings.ReplaceAll(lead, "\n  ", "\n")
	p.notify("textDocument/didChange", map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": 3},
		"contentChanges": []any{map[string]any{"text": text}},
	})
	var fmtEdits []protocol.TextEdit
	p.call("textDocument/formatting", map[string]any{"textDocument": map[string]any{"uri": uri}, "options": map[string]any{"tabSize": 2, "insertSpaces": true}}, &fmtEdits)
	// Byte for byte what `wfc fmt` writes.
	fmtCmd := exec.Command(bin, "fmt")
	fmtCmd.Stdin = strings.NewReader(text)
	wfcFmt, err := fmtCmd.Output()
	if err != nil {
		t.Fatalf("wfc fmt: %v", err)
	}
	if got := applyEdits(t, text, fmtEdits); got != string(wfcFmt) || len(fmtEdits) == 0 {
		t.Errorf("formatting (%d edits):\n%s\nwfc fmt:\n%s", len(fmtEdits), got, wfcFmt)
	}
	var syms []protocol.DocumentSymbol
	p.call("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": uri}}, &syms)
	if len(syms) != 1 || len(syms[0].Children) != 10 {
		t.Errorf("symbols = %+v", syms)
	}
	p.call("shutdown", nil, nil)
	p.notify("exit", nil)
	done := make(chan error, 1)
	go func() {
		for range p.msgs {
		}
		done <- nil
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not exit")
	}
	waitExit(t, p, 0)
	if n := checkFrames(t, p.raw.Bytes()); n < 11 { // 9 responses, 2 or 3 publishes
		t.Errorf("only %d frames", n)
	}
	if !strings.Contains(string(p.stderr.Bytes()), "wfc language server starting") {
		t.Errorf("no log on stderr: %s", p.stderr.Bytes())
	}
}

func hasLabel(items []completionItem, label string) bool {
	for _, it := range items {
		if it.Label == label {
			return true
		}
	}
	return false
}

// TestEndToEndExitWithoutShutdown: exit code 1, and the end of the input
// ends the server with 0.
func TestEndToEndExitCodes(t *testing.T) {
	p := startProc(t)
	p.call("initialize", map[string]any{"capabilities": map[string]any{}}, nil)
	p.notify("exit", nil)
	waitExit(t, p, 1)

	p = startProc(t)
	p.call("initialize", map[string]any{"capabilities": map[string]any{}}, nil)
	p.in.Close()
	waitExit(t, p, 0)

	p = startProc(t, "--bogus")
	waitExit(t, p, 2)
}

func waitExit(t *testing.T, p *procClient, want int) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("process did not exit")
	}
	if got := p.cmd.ProcessState.ExitCode(); got != want {
		t.Errorf("exit code %d, want %d; stderr:\n%s", got, want, p.stderr.Bytes())
	}
	checkFrames(t, p.raw.Bytes())
}

func sourceFile(src string) *source.File { return source.NewFile("", []byte(src)) }
