package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	protocol "github.com/tliron/glsp/protocol_3_16"
)

// testClient speaks JSON-RPC to an in-process server over pipes, the way an
// editor does over stdio.
type testClient struct {
	t   testing.TB
	st  *stream
	srv *server

	mu      sync.Mutex
	nextID  int
	pending map[string]chan *message
	pubs    map[string][]testPublish // every publish, in order
	changed chan struct{}            // closed and replaced on each publish
	notes   []message

	done   chan error
	closer func()
}

// newTestClient starts a server; tweak, when set, may change it before it
// runs (tests inject faults there).
func newTestClient(t testing.TB, opts Options, tweak func(*server)) *testClient {
	t.Helper()
	sr, cw := io.Pipe() // client -> server
	cr, sw := io.Pipe() // server -> client
	if opts.Debounce == 0 {
		opts.Debounce = 5 * time.Millisecond
	}
	srv := newServer(opts)
	if tweak != nil {
		tweak(srv)
	}
	c := &testClient{
		t: t, st: newStream(cr, cw), srv: srv,
		pending: map[string]chan *message{}, pubs: map[string][]testPublish{},
		changed: make(chan struct{}), done: make(chan error, 1),
	}
	go func() {
		err := srv.serve(context.Background(), newStream(sr, sw))
		sw.Close()
		c.done <- err
	}()
	go c.readLoop()
	c.closer = func() { cw.Close(); sr.Close() }
	t.Cleanup(func() {
		c.closer()
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			t.Errorf("server did not stop")
		}
	})
	return c
}

func (c *testClient) readLoop() {
	for {
		body, err := c.st.read()
		if err != nil {
			return
		}
		var m message
		if err := json.Unmarshal(body, &m); err != nil {
			c.t.Errorf("server sent malformed JSON: %v: %s", err, body)
			return
		}
		c.mu.Lock()
		switch {
		case m.Method == "" && string(m.ID) == "null":
			c.notes = append(c.notes, m) // an error about a message without id
		case m.Method == "" && len(m.ID) > 0:
			if ch := c.pending[string(m.ID)]; ch != nil {
				ch <- &m
				delete(c.pending, string(m.ID))
			} else {
				c.t.Errorf("response to an unknown request %s", m.ID)
			}
		case m.Method == string(protocol.ServerTextDocumentPublishDiagnostics):
			var p testPublish
			if err := json.Unmarshal(m.Params, &p); err != nil {
				c.t.Errorf("bad publishDiagnostics: %v", err)
			}
			c.pubs[p.URI] = append(c.pubs[p.URI], p)
			close(c.changed)
			c.changed = make(chan struct{})
		default:
			c.notes = append(c.notes, m)
		}
		c.mu.Unlock()
	}
}

// call sends a request and decodes its result into result (unless nil).
func (c *testClient) call(method string, params, result any) *rpcError {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := strconv.Itoa(c.nextID)
	ch := make(chan *message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.st.write(map[string]any{"jsonrpc": "2.0", "id": c.nextIDRaw(id), "method": method, "params": params}); err != nil {
		c.t.Fatalf("write %s: %v", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return m.Error
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				c.t.Fatalf("%s: cannot decode result %s: %v", method, m.Result, err)
			}
		}
		return nil
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s: no response", method)
		return nil
	}
}

func (c *testClient) nextIDRaw(id string) json.RawMessage { return json.RawMessage(id) }

// mustCall is call that fails the test on an error response.
func (c *testClient) mustCall(method string, params, result any) {
	c.t.Helper()
	if err := c.call(method, params, result); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

func (c *testClient) notify(method string, params any) {
	c.t.Helper()
	if err := c.st.write(map[string]any{"jsonrpc": "2.0", "method": method, "params": params}); err != nil {
		c.t.Fatalf("write %s: %v", method, err)
	}
}

func (c *testClient) initialize() protocol.InitializeResult {
	c.t.Helper()
	var res protocol.InitializeResult
	yes := true
	params := map[string]any{
		"processId": nil,
		"rootUri":   nil,
		"capabilities": map[string]any{
			"textDocument": map[string]any{
				"documentSymbol": map[string]any{"hierarchicalDocumentSymbolSupport": yes},
			},
		},
	}
	var raw json.RawMessage
	c.mustCall("initialize", params, &raw)
	// glsp's ServerCapabilities has its own decoder; keep the raw form too.
	_ = json.Unmarshal(raw, &res)
	c.notify("initialized", map[string]any{})
	return res
}

func (c *testClient) open(uri, text string) {
	c.notify("textDocument/didOpen", map[string]any{
		"textDocument": map[string]any{"uri": uri, "languageId": "wf", "version": 1, "text": text},
	})
}

func (c *testClient) changeFull(uri string, version int, text string) {
	c.notify("textDocument/didChange", map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": version},
		"contentChanges": []any{map[string]any{"text": text}},
	})
}

func (c *testClient) changeRange(uri string, version int, r protocol.Range, text string) {
	c.notify("textDocument/didChange", map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": version},
		"contentChanges": []any{map[string]any{"range": r, "text": text}},
	})
}

// diagnostics waits for the diagnostics of uri at version.
func (c *testClient) diagnostics(uri string, version int) []testDiagnostic {
	c.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		pubs := c.pubs[uri]
		ch := c.changed
		c.mu.Unlock()
		if n := len(pubs); n > 0 && pubs[n-1].Version != nil && int(*pubs[n-1].Version) == version {
			return pubs[n-1].Diagnostics
		}
		select {
		case <-ch:
		case <-deadline:
			c.t.Fatalf("no diagnostics for %s version %d (got %d publishes)", uri, version, len(pubs))
			return nil
		}
	}
}

func (c *testClient) publishes(uri string) []testPublish {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]testPublish(nil), c.pubs[uri]...)
}

// shutdown sends shutdown and exit and returns Serve's error.
func (c *testClient) shutdown() error {
	c.t.Helper()
	c.mustCall("shutdown", nil, nil)
	c.notify("exit", nil)
	select {
	case err := <-c.done:
		c.done <- err // for Cleanup
		return err
	case <-time.After(5 * time.Second):
		c.t.Fatal("server did not exit")
		return nil
	}
}

// marked splits a source with one "|" cursor marker (or "‸" when the
// source needs "|") into the text and the LSP position of the marker.
func marked(t testing.TB, src string) (string, protocol.Position) {
	t.Helper()
	marker := "|"
	if strings.Contains(src, "‸") {
		marker = "‸"
	}
	i := strings.Index(src, marker)
	if i < 0 {
		t.Fatalf("no cursor marker in %q", src)
	}
	text := src[:i] + src[i+len(marker):]
	line := strings.Count(text[:i], "\n")
	ls := strings.LastIndex(text[:i], "\n") + 1
	return text, protocol.Position{Line: uint32(line), Character: uint32(utf16Len([]byte(text[ls:i])))}
}

func tdp(uri string, pos protocol.Position) map[string]any {
	return map[string]any{"textDocument": map[string]any{"uri": uri}, "position": pos}
}

func fmtRange(r protocol.Range) string {
	return fmt.Sprintf("%d:%d-%d:%d", r.Start.Line, r.Start.Character, r.End.Line, r.End.Character)
}

// testDiagnostic decodes a diagnostic as it is on the wire (glsp's
// IntegerOrString cannot decode: its UnmarshalJSON has a value receiver).
type testDiagnostic struct {
	Range              protocol.Range                          `json:"range"`
	Severity           int                                     `json:"severity"`
	Code               string                                  `json:"code"`
	Source             string                                  `json:"source"`
	Message            string                                  `json:"message"`
	RelatedInformation []protocol.DiagnosticRelatedInformation `json:"relatedInformation"`
}

type testPublish struct {
	URI         string           `json:"uri"`
	Version     *int             `json:"version"`
	Diagnostics []testDiagnostic `json:"diagnostics"`
}
