package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tliron/glsp"
	protocol "github.com/tliron/glsp/protocol_3_16"
)

// DefaultDebounce is how long the server waits after a change before it
// compiles the document and publishes its diagnostics: typing a word
// compiles once, not once per key.
const DefaultDebounce = 75 * time.Millisecond

// Options configures the server. The zero value is ready to use.
type Options struct {
	// Logger receives the server's log; nil discards it. The protocol
	// owns standard output, so never log there.
	Logger *slog.Logger
	// Debounce is the delay between a change and its diagnostics;
	// zero means DefaultDebounce, a negative value no delay.
	Debounce time.Duration
	// ReadFile reads imported files and child flows that are not open in
	// the editor; nil means compiler.ReadFile, which refuses anything but
	// a regular file within the size limit of a source file.
	ReadFile func(path string) ([]byte, error)
	// ClientProcessID, when positive, is the editor's process: the server
	// exits when it is gone (as with the processId of initialize).
	ClientProcessID int
	// Version is reported as serverInfo.version.
	Version string

	// onPublish, for tests, is called after diagnostics are sent.
	onPublish func(uri string, version int32)
}

// ErrExitWithoutShutdown is returned by Serve when the client sent exit
// without shutdown first; the LSP specification asks for exit code 1 then.
var ErrExitWithoutShutdown = errors.New("exit notification without a shutdown request")

// errClientGone is returned when the client process died.
var errClientGone = errors.New("the client process exited")

// Serve runs a language server that reads requests from r and writes
// responses and notifications to w, until the client sends exit, r is
// closed, or ctx is done. It returns nil after shutdown and exit or at the
// end of r, ErrExitWithoutShutdown after an exit without shutdown.
func Serve(ctx context.Context, r io.Reader, w io.Writer, opts Options) error {
	s := newServer(opts)
	return s.serve(ctx, newStream(r, w))
}

// server states.
const (
	stateNew = iota
	stateRunning
	stateShutdown
)

type server struct {
	opts    Options
	log     *slog.Logger
	out     *stream
	handler *protocol.Handler
	docs    *store

	state  int // read-loop goroutine only
	closed atomic.Bool

	hierarchicalSymbols bool
	watchFiles          bool          // the client can register a file watcher (workspace.go)
	snippets            bool          // the client takes completion snippets (snippets.go)
	compileSlots        chan struct{} // bounds the diagnostics compilations running at once
	roots               []string      // workspace folders: where a handler rename looks for uses
	clientPID           atomic.Int64
}

func newServer(opts Options) *server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case opts.Debounce == 0:
		opts.Debounce = DefaultDebounce
	case opts.Debounce < 0:
		opts.Debounce = 0
	}
	s := &server{opts: opts, log: opts.Logger, docs: newStore(), hierarchicalSymbols: true,
		compileSlots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))}
	s.handler = s.protocolHandler()
	if opts.ClientProcessID > 0 {
		s.clientPID.Store(int64(opts.ClientProcessID))
	}
	return s
}

// stopping reports whether the server is shutting down: no more
// diagnostics are computed or sent.
func (s *server) stopping() bool { return s.closed.Load() }

func (s *server) stop() { s.closed.Store(true) }

// notify sends a notification; errors (a closed pipe) are logged.
func (s *server) notify(method string, params any) {
	if err := s.out.notify(method, params); err != nil {
		s.log.Debug("cannot send notification", "method", method, "err", err)
	}
}

func (s *server) serve(ctx context.Context, out *stream) error {
	s.out = out
	defer s.stop()
	type read struct {
		body []byte
		err  error
	}
	msgs := make(chan read)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			body, err := out.read()
			select {
			case msgs <- read{body, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	watch := time.NewTicker(2 * time.Second)
	defer watch.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-watch.C:
			if pid := s.clientPID.Load(); pid > 0 && !processAlive(int(pid)) {
				s.log.Info("client process is gone; exiting", "pid", pid)
				return errClientGone
			}
		case m := <-msgs:
			if m.err != nil {
				if m.err == io.EOF {
					s.log.Info("input closed")
					return nil
				}
				s.log.Error("cannot read message", "err", m.err)
				return m.err
			}
			exit, err := s.handleMessage(m.body)
			if exit {
				return err
			}
		}
	}
}

// handleMessage handles one message. It reports whether the server must
// exit, and with which error.
func (s *server) handleMessage(body []byte) (exit bool, err error) {
	var msg message
	if err := json.Unmarshal(body, &msg); err != nil {
		s.log.Warn("malformed message", "err", err)
		_ = s.out.replyError(nil, &rpcError{Code: codeParseError, Message: "malformed JSON: " + err.Error()})
		return false, nil
	}
	if msg.Method == "" {
		return false, nil // a response: the server sends no requests
	}
	params := msg.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	start := time.Now()
	if !msg.isRequest() {
		switch {
		case msg.Method == string(protocol.MethodExit):
			if s.state == stateShutdown {
				return true, nil
			}
			return true, ErrExitWithoutShutdown
		case s.state != stateRunning:
			return false, nil // notifications before initialize are dropped
		}
		if _, rerr := s.dispatch(msg.Method, params); rerr != nil && rerr.Code != codeMethodNotFound {
			s.log.Warn("notification failed", "method", msg.Method, "err", rerr.Message)
		}
		s.log.Debug("notification", "method", msg.Method, "elapsed", time.Since(start))
		return false, nil
	}

	var result any
	var rerr *rpcError
	switch {
	case msg.Method == string(protocol.MethodInitialize):
		if s.state != stateNew {
			rerr = &rpcError{Code: codeInvalidRequest, Message: "initialize was already received"}
		} else {
			result = s.initialize(params)
			s.state = stateRunning
		}
	case s.state == stateNew:
		rerr = &rpcError{Code: codeServerNotInitialized, Message: "the server is not initialized"}
	case s.state == stateShutdown:
		rerr = &rpcError{Code: codeInvalidRequest, Message: "the server is shutting down"}
	case msg.Method == string(protocol.MethodShutdown):
		s.state = stateShutdown
		s.stop()
	default:
		result, rerr = s.dispatch(msg.Method, params)
	}
	if rerr != nil {
		err = s.out.replyError(msg.ID, rerr)
	} else {
		err = s.out.reply(msg.ID, result)
	}
	if err != nil {
		s.log.Error("cannot send response", "method", msg.Method, "err", err)
		if errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
			return true, nil
		}
	}
	s.log.Debug("request", "method", msg.Method, "elapsed", time.Since(start), "failed", rerr != nil)
	return false, nil
}

// dispatch runs the handler of method through glsp's protocol.Handler. A
// panic in a handler becomes an internal error response and the server
// lives on.
func (s *server) dispatch(method string, params json.RawMessage) (result any, rerr *rpcError) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panic", "method", method, "panic", r, "stack", string(debug.Stack()))
			result, rerr = nil, &rpcError{Code: codeInternalError, Message: fmt.Sprintf("internal error in %s: %v", method, r)}
		}
	}()
	ctx := &glsp.Context{
		Method: method,
		Params: params,
		Notify: s.notify,
		// A server-to-client request from a handler would deadlock: the
		// reply could only be read by the loop that runs the handler.
		Call: func(method string, params, result any) {
			s.log.Error("server-to-client requests are not supported from handlers", "method", method)
		},
	}
	if method == methodInlayHint { // LSP 3.17: not in glsp's handler (inlay.go)
		hints, rerr := s.inlayHints(params)
		if rerr != nil {
			return nil, rerr
		}
		return hints, nil
	}
	r, validMethod, validParams, err := s.handler.Handle(ctx)
	switch {
	case !validMethod:
		return nil, &rpcError{Code: codeMethodNotFound, Message: "method not supported: " + method}
	case !validParams:
		msg := "invalid params"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, &rpcError{Code: codeInvalidParams, Message: msg}
	case err != nil:
		var re *rpcError
		if errors.As(err, &re) {
			return nil, re
		}
		return nil, &rpcError{Code: codeRequestFailed, Message: err.Error()}
	}
	return r, nil
}

// initialize answers the initialize request. Its params are read leniently:
// a client capability that does not fit glsp's types must not keep the
// server from starting.
func (s *server) initialize(raw json.RawMessage) any {
	var p protocol.InitializeParams
	if err := json.Unmarshal(raw, &p); err != nil {
		s.log.Warn("cannot read all initialize params", "err", err)
		var min struct {
			ProcessID *int32 `json:"processId"`
		}
		_ = json.Unmarshal(raw, &min)
		p = protocol.InitializeParams{ProcessID: min.ProcessID}
	}
	if p.ProcessID != nil && *p.ProcessID > 0 && s.clientPID.Load() == 0 {
		s.clientPID.Store(int64(*p.ProcessID))
	}
	if td := p.Capabilities.TextDocument; td != nil && td.DocumentSymbol != nil && td.DocumentSymbol.HierarchicalDocumentSymbolSupport != nil {
		s.hierarchicalSymbols = *td.DocumentSymbol.HierarchicalDocumentSymbolSupport
	} else {
		s.hierarchicalSymbols = false
	}
	s.roots = rootsOf(&p)
	if td := p.Capabilities.TextDocument; td != nil && td.Completion != nil && td.Completion.CompletionItem != nil && td.Completion.CompletionItem.SnippetSupport != nil {
		s.snippets = *td.Completion.CompletionItem.SnippetSupport
	}
	if ws := p.Capabilities.Workspace; ws != nil && ws.DidChangeWatchedFiles != nil && ws.DidChangeWatchedFiles.DynamicRegistration != nil {
		s.watchFiles = *ws.DidChangeWatchedFiles.DynamicRegistration
	}
	if p.ClientInfo != nil {
		s.log.Info("client", "name", p.ClientInfo.Name)
	}
	s.handler.SetInitialized(true)

	yes := true
	version := s.opts.Version
	syncKind := protocol.TextDocumentSyncKindIncremental
	return initializeResult{
		Capabilities: capabilities{ServerCapabilities: protocol.ServerCapabilities{
			// Save: a saved import re-checks the documents that import it.
			TextDocumentSync: protocol.TextDocumentSyncOptions{OpenClose: &yes, Change: &syncKind, Save: protocol.SaveOptions{}},
			CompletionProvider: &protocol.CompletionOptions{
				TriggerCharacters: []string{".", "\"", " ", "/"}, // "/": paths of import and uses
			},
			HoverProvider:              true,
			DefinitionProvider:         true,
			ReferencesProvider:         true,
			DocumentHighlightProvider:  true,
			DocumentSymbolProvider:     true,
			DocumentFormattingProvider: true,
			RenameProvider:             protocol.RenameOptions{PrepareProvider: &yes},
			CodeActionProvider:         protocol.CodeActionOptions{CodeActionKinds: []protocol.CodeActionKind{protocol.CodeActionKindQuickFix, codeActionKindFixAll}},
			FoldingRangeProvider:       true,
			SelectionRangeProvider:     true,
			CallHierarchyProvider:      true,
			SignatureHelpProvider:      &protocol.SignatureHelpOptions{TriggerCharacters: signatureTriggers, RetriggerCharacters: []string{")"}},
			DocumentLinkProvider:       &protocol.DocumentLinkOptions{},
			WorkspaceSymbolProvider:    true,
			SemanticTokensProvider: protocol.SemanticTokensOptions{
				Legend: protocol.SemanticTokensLegend{TokenTypes: tokenTypeNames(), TokenModifiers: tokenModifierNames()},
				Full:   true,
			},
		}, InlayHintProvider: true},
		ServerInfo: &protocol.InitializeResultServerInfo{Name: "wfc", Version: &version},
	}
}

// initializeResult is protocol.InitializeResult with the capabilities of
// LSP 3.17 the server has and glsp's 3.16 types lack.
type initializeResult struct {
	Capabilities capabilities                         `json:"capabilities"`
	ServerInfo   *protocol.InitializeResultServerInfo `json:"serverInfo,omitempty"`
}

type capabilities struct {
	protocol.ServerCapabilities
	InlayHintProvider bool `json:"inlayHintProvider,omitempty"`
}

// protocolHandler wires the LSP methods to the server's handlers.
func (s *server) protocolHandler() *protocol.Handler {
	return &protocol.Handler{
		Initialized: func(*glsp.Context, *protocol.InitializedParams) error {
			if s.watchFiles {
				s.registerWatcher()
			}
			return nil
		},
		SetTrace:      func(*glsp.Context, *protocol.SetTraceParams) error { return nil },
		CancelRequest: func(*glsp.Context, *protocol.CancelParams) error { return nil }, // requests run to completion; they are short
		WorkspaceDidChangeConfiguration: func(*glsp.Context, *protocol.DidChangeConfigurationParams) error {
			return nil
		},
		WorkspaceDidChangeWatchedFiles: func(_ *glsp.Context, p *protocol.DidChangeWatchedFilesParams) error {
			s.filesChanged(p.Changes)
			return nil
		},

		TextDocumentDidOpen: func(_ *glsp.Context, p *protocol.DidOpenTextDocumentParams) error {
			s.didOpen(p.TextDocument.URI, p.TextDocument.Version, p.TextDocument.Text)
			return nil
		},
		TextDocumentDidChange: func(_ *glsp.Context, p *protocol.DidChangeTextDocumentParams) error {
			return s.didChange(p.TextDocument.URI, p.TextDocument.Version, p.ContentChanges)
		},
		TextDocumentDidClose: func(_ *glsp.Context, p *protocol.DidCloseTextDocumentParams) error {
			s.didClose(p.TextDocument.URI)
			return nil
		},
		TextDocumentDidSave: func(_ *glsp.Context, p *protocol.DidSaveTextDocumentParams) error {
			s.recheckDependants(p.TextDocument.URI)
			return nil
		},

		TextDocumentCompletion: func(_ *glsp.Context, p *protocol.CompletionParams) (any, error) {
			return s.completion(p)
		},
		TextDocumentHover: func(_ *glsp.Context, p *protocol.HoverParams) (*protocol.Hover, error) {
			return s.hover(p)
		},
		TextDocumentDefinition: func(_ *glsp.Context, p *protocol.DefinitionParams) (any, error) {
			return s.definition(p)
		},
		TextDocumentReferences: func(_ *glsp.Context, p *protocol.ReferenceParams) ([]protocol.Location, error) {
			return s.references(p)
		},
		TextDocumentDocumentHighlight: func(_ *glsp.Context, p *protocol.DocumentHighlightParams) ([]protocol.DocumentHighlight, error) {
			return s.highlight(p)
		},
		TextDocumentPrepareRename: func(_ *glsp.Context, p *protocol.PrepareRenameParams) (any, error) {
			if r, ok, err := s.prepareRenameHandler(p); ok { // rename_handler.go: across files
				return r, err
			}
			return s.prepareRename(p)
		},
		TextDocumentRename: func(_ *glsp.Context, p *protocol.RenameParams) (*protocol.WorkspaceEdit, error) {
			if r, ok, err := s.renameHandler(p); ok {
				return r, err
			}
			return s.rename(p)
		},
		TextDocumentDocumentSymbol: func(_ *glsp.Context, p *protocol.DocumentSymbolParams) (any, error) {
			return s.documentSymbols(p)
		},
		TextDocumentFormatting: func(_ *glsp.Context, p *protocol.DocumentFormattingParams) ([]protocol.TextEdit, error) {
			return s.formatting(p)
		},
		TextDocumentCodeAction: func(_ *glsp.Context, p *protocol.CodeActionParams) (any, error) {
			return s.codeActions(p)
		},
		TextDocumentSelectionRange: func(_ *glsp.Context, p *protocol.SelectionRangeParams) ([]protocol.SelectionRange, error) {
			return s.selectionRanges(p)
		},
		TextDocumentPrepareCallHierarchy: func(_ *glsp.Context, p *protocol.CallHierarchyPrepareParams) ([]protocol.CallHierarchyItem, error) {
			return s.prepareCallHierarchy(p) // calls.go
		},
		CallHierarchyIncomingCalls: func(_ *glsp.Context, p *protocol.CallHierarchyIncomingCallsParams) ([]protocol.CallHierarchyIncomingCall, error) {
			return s.incomingCalls(p)
		},
		CallHierarchyOutgoingCalls: func(_ *glsp.Context, p *protocol.CallHierarchyOutgoingCallsParams) ([]protocol.CallHierarchyOutgoingCall, error) {
			return s.outgoingCalls(p)
		},
		TextDocumentSignatureHelp: func(_ *glsp.Context, p *protocol.SignatureHelpParams) (*protocol.SignatureHelp, error) {
			return s.signatureHelp(p)
		},
		TextDocumentSemanticTokensFull: func(_ *glsp.Context, p *protocol.SemanticTokensParams) (*protocol.SemanticTokens, error) {
			return s.semanticTokens(p)
		},
		TextDocumentFoldingRange: func(_ *glsp.Context, p *protocol.FoldingRangeParams) ([]protocol.FoldingRange, error) {
			return s.foldingRanges(p)
		},
		WorkspaceSymbol: func(_ *glsp.Context, p *protocol.WorkspaceSymbolParams) ([]protocol.SymbolInformation, error) {
			return s.workspaceSymbols(p)
		},
		TextDocumentDocumentLink: func(_ *glsp.Context, p *protocol.DocumentLinkParams) ([]protocol.DocumentLink, error) {
			return s.documentLinks(p)
		},
	}
}

// snapshotFor returns the latest snapshot of uri, or nil when the document
// is not open: requests about it get an empty answer.
func (s *server) snapshotFor(uri string) *snapshot {
	d := s.docs.get(uri)
	if d == nil {
		s.log.Debug("request for a document that is not open", "uri", uri)
		return nil
	}
	return d.latest()
}

// processAlive reports whether the process pid exists.
func processAlive(pid int) bool {
	if runtime.GOOS == "windows" {
		return true // signal 0 does not exist there; rely on exit and EOF
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
