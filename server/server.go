package server

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the server's OpenAPI 3.1 document.
func OpenAPI() []byte { return openAPIDoc }

// Config configures a Server.
type Config struct {
	// Engine is the runtime the server drives (required).
	Engine *runtime.Engine
	// Tokens authenticates requests; nil or empty lets every request do
	// everything, which Listen allows on loopback addresses only.
	Tokens *Tokens
	// Workflows is the workflow store; nil means the engine's versioned
	// store (EngineWorkflows).
	Workflows WorkflowStore
	// CompletionKey signs completion tokens (HMAC-SHA256, at least 32
	// bytes). Every server of a deployment needs the same key for a token
	// one issued to be accepted by another; nil means a random key of this
	// process.
	CompletionKey []byte
	// TasksHandler serves /v1/tasks/ (the remote task queue, package
	// server/tasksapi) behind the "work" scope; nil answers 404 there.
	TasksHandler http.Handler
	// MaxBodyBytes bounds a request body (default 4 MiB).
	MaxBodyBytes int64
	// MaxStreams bounds the open event streams (default 256); one more is
	// refused with 503.
	MaxStreams int
	// Heartbeat is the interval of the comment lines an event stream
	// sends while idle (default 15 s), so that proxies keep it open.
	Heartbeat time.Duration
	// Poll is how often an event stream reads new events (default 200 ms).
	Poll time.Duration
	// Logger receives the request log (method, path, status, duration,
	// subject; never a header, body or token).
	Logger *slog.Logger
}

// A Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg     Config
	eng     *runtime.Engine
	wf      WorkflowStore
	log     *slog.Logger
	mux     *http.ServeMux
	streams chan struct{} // a slot per open event stream
	done    chan struct{} // closed by Shutdown: streams end
	once    sync.Once
	wg      sync.WaitGroup // open streams
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, errors.New("server: Config.Engine is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 256
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CompletionKey == nil {
		cfg.CompletionKey = make([]byte, 32)
		if _, err := rand.Read(cfg.CompletionKey); err != nil {
			return nil, err
		}
	} else if len(cfg.CompletionKey) < 32 {
		return nil, errors.New("server: the completion key is at least 32 bytes")
	}
	s := &Server{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, mux: http.NewServeMux(),
		streams: make(chan struct{}, cfg.MaxStreams), done: make(chan struct{})}
	s.wf = cfg.Workflows
	if s.wf == nil {
		s.wf = EngineWorkflows{cfg.Engine}
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	open := func(pattern string, h http.HandlerFunc) { s.mux.Handle(pattern, h) }
	auth := func(pattern, scope string, h http.HandlerFunc) { s.mux.Handle(pattern, s.authorize(scope, h)) }

	open("GET /healthz", s.healthz)
	open("GET /readyz", s.readyz)
	open("GET /openapi.json", s.openapi)

	auth("POST /v1/workflows", ScopeSubmit, s.deployWorkflow)
	auth("GET /v1/workflows", ScopeRead, s.listWorkflows)
	auth("GET /v1/workflows/{ref}", ScopeRead, s.getWorkflow)
	auth("GET /v1/workflows/{tag}/versions", ScopeRead, s.workflowVersions)

	auth("POST /v1/runs", ScopeSubmit, s.submitRun)
	auth("GET /v1/runs", ScopeRead, s.listRuns)
	auth("GET /v1/runs/{run}", ScopeRead, s.getRun)
	auth("GET /v1/runs/{run}/events", ScopeRead, s.runEvents)
	auth("POST /v1/runs/{run}/cancel", ScopeSubmit, s.cancelRun)
	auth("POST /v1/runs/{run}/retry", ScopeSubmit, s.retryRun)

	auth("GET /v1/approvals", ScopeRead, s.listApprovals)
	auth("POST /v1/runs/{run}/approvals/{x}/decision", ScopeDecide, s.decide)
	auth("POST /v1/runs/{run}/signals", ScopeDecide, s.signal)
	auth("POST /v1/runs/{run}/completion-tokens", ScopeDecide, s.issueCompletion)
	// A completion's token is its credential (single use, one step).
	open("POST /v1/completions/{token}", s.complete)

	// The remote task queue is mounted here from Config.TasksHandler
	// (package server/tasksapi), behind the "work" scope.
	if s.cfg.TasksHandler != nil {
		s.mux.Handle("/v1/tasks/", s.authorize(ScopeWork, s.cfg.TasksHandler.ServeHTTP))
	}
	// Live patches (docs/patching.md): admin only.
	auth("POST /v1/runs/{run}/patch", ScopeAdmin, s.patchRun)
	auth("POST /v1/workflows/{tag}/patch-running", ScopeAdmin, s.patchRunning)

	open("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, "not-found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
}

// ServeHTTP serves the API: it bounds the body, logs the request and
// routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	}
	rw := &statusWriter{ResponseWriter: w}
	// The catch-all "/" answers every path no route has; a path that a
	// route has for another method is a 405.
	if _, pattern := s.mux.Handler(r); pattern == "/" && r.URL.Path != "/" {
		var allow []string
		for _, m := range []string{"GET", "POST"} {
			if _, p := s.mux.Handler(withMethod(r, m)); m != r.Method && p != "/" && p != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			rw.Header().Set("Allow", strings.Join(allow, ", "))
			writeProblem(rw, r, http.StatusMethodNotAllowed, "method-not-allowed", r.Method+" is not allowed on "+r.URL.Path)
			s.logRequest(r, rw.status, start)
			return
		}
	}
	s.mux.ServeHTTP(rw, r)
	s.logRequest(r, rw.status, start)
}

func withMethod(r *http.Request, m string) *http.Request {
	c := r.Clone(r.Context())
	c.Method = m
	return c
}

// logPath is the request's path as logs show it: the path of a completion
// holds its token (a credential), which is never logged.
func logPath(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, "/v1/completions/") {
		return "/v1/completions/…"
	}
	return r.URL.Path
}

func (s *Server) logRequest(r *http.Request, status int, start time.Time) {
	subj := ""
	if p := principalOf(r.Context()); p != nil {
		subj = p.Subject
	}
	s.log.Info("wfc serve", "method", r.Method, "path", logPath(r), "status", status, "ms", time.Since(start).Milliseconds(), "subject", subj)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authorize checks the bearer token and its scope before h.
func (s *Server) authorize(scope string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := anonymous
		if s.cfg.Tokens != nil && !s.cfg.Tokens.Empty() {
			var err error
			p, err = s.cfg.Tokens.authenticate(bearer(r.Header.Get("Authorization")))
			if err != nil {
				writeProblem(w, r, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required ("+err.Error()+")")
				return
			}
		}
		if !p.Allows(scope) {
			writeProblem(w, r, http.StatusForbidden, "forbidden", fmt.Sprintf("this operation needs scope %q; the token of %s has %s", scope, p.Subject, strings.Join(p.Scopes, ",")))
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.eng.Ready(ctx); err != nil {
		s.log.Warn("wfc serve: not ready", "err", err)
		writeProblem(w, r, http.StatusServiceUnavailable, "unavailable", "redis is not reachable or its scripts could not be loaded")
		return
	}
	select {
	case <-s.done:
		writeProblem(w, r, http.StatusServiceUnavailable, "unavailable", "the server is shutting down")
		return
	default:
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDoc)
}

// Shutdown ends the open event streams (each gets a final "shutdown"
// event) and waits for them, or for ctx. Call it with http.Server's
// Shutdown, which drains the other requests.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() { close(s.done) })
	ch := make(chan struct{})
	go func() { s.wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsLoopback reports whether addr (host:port) listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
