package tasksapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

// Config configures the handler.
type Config struct {
	// Remote is the runtime's remote task queue.
	Remote *runtime.Remote
	// Authorize authenticates a request (for the work scope) and returns
	// its subject, for the logs. An error refuses the request: with the
	// status its HTTPStatus method gives, if it has one (403 for a token
	// without the scope), else 401; its message is the problem's detail,
	// so it must not carry a secret. Nil lets every request in: only for
	// tests and loopback setups where the server authenticates itself.
	Authorize func(r *http.Request) (subject string, err error)
	// MaxBodyBytes bounds a request body (default 1 MiB + 64 KiB: a
	// completion carries an output of up to max_output_bytes).
	MaxBodyBytes int64
	// Logger receives the logs (default slog.Default()). Leases are
	// never logged.
	Logger *slog.Logger
}

// Paths, relative to the server's root.
const (
	PathPrefix = "/v1/tasks/"
	pathPoll   = "POST /v1/tasks/poll"
)

type api struct {
	cfg Config
	log *slog.Logger
}

// New returns the handler of the /v1/tasks/ paths.
func New(cfg Config) http.Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = runtime.DefaultMaxValueBytes + 64<<10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &api{cfg: cfg, log: cfg.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc(pathPoll, a.auth(a.poll))
	mux.HandleFunc("POST /v1/tasks/{id}/heartbeat", a.auth(a.heartbeat))
	mux.HandleFunc("POST /v1/tasks/{id}/complete", a.auth(a.complete))
	mux.HandleFunc("POST /v1/tasks/{id}/fail", a.auth(a.fail))
	mux.HandleFunc("/v1/tasks/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, "not-found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func (a *api) auth(next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		subject := ""
		if a.cfg.Authorize != nil {
			var err error
			subject, err = a.cfg.Authorize(r)
			if err != nil {
				status := http.StatusUnauthorized
				var hs interface{ HTTPStatus() int }
				if errors.As(err, &hs) {
					status = hs.HTTPStatus()
				}
				if status == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", `Bearer realm="wfc"`)
				}
				code := "unauthorized"
				if status == http.StatusForbidden {
					code = "forbidden"
				}
				writeProblem(w, r, status, code, err.Error())
				return
			}
		}
		next(w, r, subject)
	}
}

// decode reads a JSON request body into v: application/json, at most
// MaxBodyBytes, no unknown fields, nothing after the value.
func (a *api) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeProblem(w, r, http.StatusUnsupportedMediaType, "unsupported-media", "send application/json")
			return false
		}
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeProblem(w, r, http.StatusRequestEntityTooLarge, "too-large",
				fmt.Sprintf("the body is over the limit of %d bytes", mbe.Limit))
			return false
		}
		writeProblem(w, r, http.StatusBadRequest, "bad-request", err.Error())
		return false
	}
	return true
}

// PollRequest is the body of POST /v1/tasks/poll.
type PollRequest struct {
	Worker   string   `json:"worker"`
	Handlers []string `json:"handlers"`
	WaitMS   int64    `json:"wait_ms"`
}

func (a *api) poll(w http.ResponseWriter, r *http.Request, subject string) {
	var req PollRequest
	if !a.decode(w, r, &req) {
		return
	}
	if req.WaitMS < 0 {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "wait_ms must not be negative")
		return
	}
	// Longer waits are cut to the server's bound (the response then is
	// 204 sooner than asked, which a client treats as any empty poll).
	wait := time.Duration(min(req.WaitMS, a.cfg.Remote.MaxWait().Milliseconds())) * time.Millisecond
	task, err := a.cfg.Remote.Poll(r.Context(), req.Worker, req.Handlers, wait)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away: nobody to answer
		}
		a.fail500(w, r, err)
		return
	}
	if task == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	a.log.Debug("wfc tasks: leased a task", "task", task.ID, "handler", task.Handler, "run", task.RunID, "node", task.Node, "worker", req.Worker, "subject", subject)
	writeJSON(w, http.StatusOK, task)
}

// LeaseRequest is the body of POST /v1/tasks/{id}/heartbeat.
type LeaseRequest struct {
	Lease string `json:"lease"`
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	LeaseMS int64 `json:"lease_ms"`
}

func (a *api) heartbeat(w http.ResponseWriter, r *http.Request, _ string) {
	var req LeaseRequest
	if !a.decode(w, r, &req) || !needLease(w, r, req.Lease) {
		return
	}
	d, err := a.cfg.Remote.Heartbeat(r.Context(), r.PathValue("id"), req.Lease)
	if err != nil {
		a.fail500(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, HeartbeatResponse{LeaseMS: d.Milliseconds()})
}

// CompleteRequest is the body of POST /v1/tasks/{id}/complete.
type CompleteRequest struct {
	Lease  string          `json:"lease"`
	Output json.RawMessage `json:"output"`
}

func (a *api) complete(w http.ResponseWriter, r *http.Request, _ string) {
	var req CompleteRequest
	if !a.decode(w, r, &req) || !needLease(w, r, req.Lease) {
		return
	}
	if len(bytes.TrimSpace(req.Output)) == 0 {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "output is required (a JSON value)")
		return
	}
	if err := a.cfg.Remote.Complete(r.Context(), r.PathValue("id"), req.Lease, req.Output); err != nil {
		a.fail500(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// FailRequest is the body of POST /v1/tasks/{id}/fail.
type FailRequest struct {
	Lease string             `json:"lease"`
	Error *runtime.TaskError `json:"error"`
}

func (a *api) fail(w http.ResponseWriter, r *http.Request, _ string) {
	var req FailRequest
	if !a.decode(w, r, &req) || !needLease(w, r, req.Lease) {
		return
	}
	if req.Error == nil {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "error is required: {code, message, retryable}")
		return
	}
	if err := a.cfg.Remote.Fail(r.Context(), r.PathValue("id"), req.Lease, *req.Error); err != nil {
		a.fail500(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func needLease(w http.ResponseWriter, r *http.Request, lease string) bool {
	if lease == "" || len(lease) > 256 {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "lease is required: the lease of the poll's task")
		return false
	}
	return true
}

// fail500 writes the problem of a runtime error: the known ones with
// their status, anything else as 500 without its detail (logged).
func (a *api) fail500(w http.ResponseWriter, r *http.Request, err error) {
	var pe *runtime.PollError
	switch {
	case errors.As(err, &pe):
		writeProblem(w, r, http.StatusBadRequest, "bad-request", pe.Msg)
	case errors.Is(err, runtime.ErrUnknownTask):
		writeProblem(w, r, http.StatusNotFound, "unknown-task", err.Error())
	case errors.Is(err, runtime.ErrTaskTimedOut):
		writeProblem(w, r, http.StatusConflict, "timed-out", err.Error()+"; what the call posted was not taken")
	case errors.Is(err, runtime.ErrLeaseLost):
		writeProblem(w, r, http.StatusConflict, "lease-lost", err.Error()+"; the call changed nothing")
	case errors.Is(err, runtime.ErrRunEnded):
		writeProblem(w, r, http.StatusGone, "run-ended", err.Error()+"; stop working on the task")
	default:
		a.log.Error("wfc tasks: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeProblem(w, r, http.StatusInternalServerError, "internal", "the server could not handle the request; retry later")
	}
}

// A Problem is an RFC 9457 problem detail in the shape of wfc serve's
// (server.Problem, the Problem schema of server/openapi.json): type is
// the docs/api.md section of the problem, title its stable text, and Code
// (an extension member) the same slug, for clients to branch on.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	Code     string `json:"code"`
}

// ProblemBase is the namespace of the problem types: the one of wfc
// serve's problems (server.problemBase), so that both read alike.
const ProblemBase = "https://wfc-lang.github.io/wfc/docs/api#"

// problemTitles are the stable titles of the problem types; the codes
// shared with wfc serve have its titles.
var problemTitles = map[string]string{
	"bad-request":       "Bad request",
	"unauthorized":      "Missing or invalid bearer token",
	"forbidden":         "The token lacks the scope for this operation",
	"not-found":         "Not found",
	"unknown-task":      "No such task",
	"lease-lost":        "The task's lease is lost",
	"timed-out":         "The task's timeout passed",
	"run-ended":         "The task's run has ended",
	"too-large":         "Request body too large",
	"unsupported-media": "Unsupported media type",
	"internal":          "Internal error",
}

// writeProblem writes the problem code (a key of problemTitles).
func writeProblem(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(Problem{Type: ProblemBase + code, Title: problemTitles[code], Status: status, Detail: detail, Instance: r.URL.Path, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
