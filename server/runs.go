package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/runtime"
)

// A submitRequest starts a run of a deployed workflow (by tag or hash) or
// of an inline source or IR.
type submitRequest struct {
	Workflow string          `json:"workflow,omitempty"`
	Source   string          `json:"source,omitempty"`
	File     string          `json:"file,omitempty"`
	IR       json.RawMessage `json:"ir,omitempty"`
	Inputs   json.RawMessage `json:"inputs,omitempty"`
}

type submitResponse struct {
	RunID       string    `json:"run_id"`
	Workflow    string    `json:"workflow"`
	IR          string    `json:"ir"`
	Diagnostics diag.List `json:"diagnostics,omitempty"`
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// idempotentRunID derives the run id of an idempotent submit: the same
// subject and key give the same id, so the runtime's start script, which
// starts a run id once (atomically in Redis), starts one run however many
// times the request is retried, on any server of the deployment. The
// subject is part of it so that two clients cannot collide on purpose.
func idempotentRunID(subject, key string) string {
	sum := sha256.Sum256([]byte(subject + "\x00" + key))
	return "idem-" + hex.EncodeToString(sum[:20])
}

func (s *Server) submitRun(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var req submitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "the Idempotency-Key is at most 255 bytes")
		return
	}
	var wf *ir.Workflow
	var ver runtime.Version // by tag: the version read, validated against and run
	var hash string
	var diags diag.List
	switch {
	case req.Workflow != "" && (req.Source != "" || len(req.IR) > 0):
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "give workflow (a tag or hash) or an inline source or ir, not both")
		return
	case req.Workflow != "":
		wfv, v, err := s.wf.Get(ctx, req.Workflow)
		if err != nil {
			s.runtimeError(w, r, err)
			return
		}
		wf, hash, ver = wfv, v.Hash, v
	default:
		if wf, diags = s.compileUpload(w, r, req.Source, req.File, req.IR); wf == nil {
			return
		}
		var err error
		if hash, err = ir.Hash(wf); err != nil {
			s.internal(w, r, err)
			return
		}
	}
	inputs := map[string]any{}
	if len(req.Inputs) > 0 && string(req.Inputs) != "null" {
		var err error
		if inputs, err = runtime.DecodeInputs(req.Inputs); err != nil {
			writeProblemDoc(w, r, &Problem{Status: http.StatusUnprocessableEntity, Type: "invalid", Detail: "the inputs are not a JSON object", Errors: []string{err.Error()}})
			return
		}
	}
	// Validate before anything is written.
	if _, err := runtime.ValidateInputs(wf, inputs); err != nil {
		s.runtimeError(w, r, err)
		return
	}
	run := runtime.NewRunID()
	status := http.StatusCreated
	if key != "" {
		run = idempotentRunID(principalOf(ctx).Subject, key)
		if st, err := s.eng.Status(ctx, run); err == nil {
			if st.IR != hash {
				writeProblem(w, r, http.StatusUnprocessableEntity, "idempotency", "this Idempotency-Key started run "+run+" of another workflow")
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, http.StatusOK, submitResponse{RunID: run, Workflow: st.Workflow, IR: st.IR})
			return
		}
	}
	var err error
	if ver.Tag != "" {
		// By tag: the version read above, once (a tag moving meanwhile
		// does not change what this run runs), recorded under the tag so
		// that TagRuns and `wfc patch --all-running` see it.
		_, err = s.wf.SubmitVersion(ctx, wf, ver, inputs, runtime.WithRunID(run))
	} else {
		_, err = s.eng.Submit(ctx, wf, inputs, runtime.WithRunID(run))
	}
	if err != nil {
		if errors.Is(err, runtime.ErrRunExists) {
			writeProblem(w, r, http.StatusUnprocessableEntity, "idempotency", "this Idempotency-Key started run "+run+" of another workflow")
			return
		}
		s.runtimeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/runs/"+run)
	writeJSON(w, status, submitResponse{RunID: run, Workflow: wf.Name, IR: hash, Diagnostics: diags})
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rq := runtime.RunQuery{State: q.Get("state"), Workflow: q.Get("workflow"), Cursor: q.Get("cursor")}
	switch rq.State {
	case "", runtime.RunRunning, runtime.RunCompleted, runtime.RunFailed, runtime.RunCancelled:
	default:
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "state is running, completed, failed or cancelled, not "+strconv.Quote(rq.State))
		return
	}
	for name, t := range map[string]*time.Time{"from": &rq.From, "to": &rq.To} {
		if v := q.Get(name); v != "" {
			tm, err := time.Parse(time.RFC3339, v)
			if err != nil {
				writeProblem(w, r, http.StatusBadRequest, "bad-request", name+" is an RFC 3339 time, as 2026-01-02T15:04:05Z")
				return
			}
			*t = tm
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeProblem(w, r, http.StatusBadRequest, "bad-request", "limit is 1 to 500")
			return
		}
		rq.Limit = n
	}
	page, err := s.eng.ListRuns(r.Context(), rq)
	if err != nil {
		if errors.Is(err, runtime.ErrBadCursor) {
			writeProblem(w, r, http.StatusBadRequest, "bad-request", "the cursor is not one a listing returned")
			return
		}
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	st, err := s.eng.Status(r.Context(), r.PathValue("run"))
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	s.runAction(w, r, s.eng.Cancel)
}

func (s *Server) retryRun(w http.ResponseWriter, r *http.Request) {
	s.runAction(w, r, s.eng.Retry)
}

func (s *Server) runAction(w http.ResponseWriter, r *http.Request, act func(ctx context.Context, run string) error) {
	run := r.PathValue("run")
	if err := act(r.Context(), run); err != nil {
		s.runtimeError(w, r, err)
		return
	}
	st, err := s.eng.Status(r.Context(), run)
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
