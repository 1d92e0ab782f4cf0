package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/runtime"
)

// A WorkflowStore keeps deployed workflows: IR by content hash, and tags
// naming a sequence of versions (the runtime's versioned store,
// runtime/versions.go, which `wfc deploy` and live patching use too).
type WorkflowStore interface {
	// Deploy stores w and, when tag is not "", makes it tag's next
	// version (deployed by by). Without a tag only the IR is stored; the
	// Version then has the hash alone.
	Deploy(ctx context.Context, w *ir.Workflow, tag, by string) (runtime.Version, error)
	// Get returns the workflow a hash or a tag names (a tag's current
	// version); an unknown one is an error wrapping
	// runtime.ErrUnknownWorkflow or runtime.ErrUnknownTag.
	Get(ctx context.Context, ref string) (*ir.Workflow, runtime.Version, error)
	// Tags returns the deployed tags, sorted.
	Tags(ctx context.Context) ([]string, error)
	// Versions returns a tag's versions, oldest first.
	Versions(ctx context.Context, tag string) ([]runtime.Version, error)
	// SubmitVersion starts a run of w, version v of a tag as Get returned
	// them (not the tag's version at the time of the call: a submit runs
	// the version its inputs were validated against), recorded under the
	// tag (runtime.Engine.TagRuns, `wfc patch --all-running`).
	SubmitVersion(ctx context.Context, w *ir.Workflow, v runtime.Version, inputs map[string]any, opts ...runtime.SubmitOption) (string, error)
}

// EngineWorkflows is the WorkflowStore of the engine's versioned store.
type EngineWorkflows struct{ E *runtime.Engine }

func (s EngineWorkflows) Deploy(ctx context.Context, w *ir.Workflow, tag, by string) (runtime.Version, error) {
	if tag == "" {
		hash, err := s.E.StoreIR(ctx, w)
		return runtime.Version{Hash: hash}, err
	}
	return s.E.Deploy(ctx, w, tag, by)
}

func (s EngineWorkflows) Get(ctx context.Context, ref string) (*ir.Workflow, runtime.Version, error) {
	if runtime.IsIRHash(ref) {
		w, err := s.E.StoredIR(ctx, ref)
		if err != nil {
			return nil, runtime.Version{}, err
		}
		return w, runtime.Version{Hash: ref}, nil
	}
	if !runtime.ValidTag(ref) {
		return nil, runtime.Version{}, fmt.Errorf("%w: %q is neither a hash nor a tag", runtime.ErrUnknownWorkflow, ref)
	}
	return s.E.Tagged(ctx, ref)
}

func (s EngineWorkflows) Tags(ctx context.Context) ([]string, error) { return s.E.Tags(ctx) }

func (s EngineWorkflows) Versions(ctx context.Context, tag string) ([]runtime.Version, error) {
	if !runtime.ValidTag(tag) {
		return nil, fmt.Errorf("%w %s", runtime.ErrUnknownTag, tag)
	}
	return s.E.Versions(ctx, tag)
}

func (s EngineWorkflows) SubmitVersion(ctx context.Context, w *ir.Workflow, v runtime.Version, inputs map[string]any, opts ...runtime.SubmitOption) (string, error) {
	return s.E.SubmitVersion(ctx, w, v, inputs, opts...)
}

// A deployRequest deploys a source or an IR document.
type deployRequest struct {
	// Source is a .wf source; File names it in diagnostics (default
	// "workflow.wf").
	Source string          `json:"source,omitempty"`
	File   string          `json:"file,omitempty"`
	IR     json.RawMessage `json:"ir,omitempty"`
	Tag    string          `json:"tag,omitempty"`
}

type workflowResponse struct {
	Hash        string          `json:"hash"`
	Name        string          `json:"name"`
	Tag         string          `json:"tag,omitempty"`
	Version     int             `json:"version,omitempty"`
	Diagnostics diag.List       `json:"diagnostics"`
	IR          json.RawMessage `json:"ir,omitempty"`
}

// validTag: the runtime's tags (1 to 64 of [A-Za-z0-9._:-]), not a hash.
func validTag(t string) bool {
	return runtime.ValidTag(t) && !strings.HasPrefix(t, "sha256:")
}

// noImports refuses the file reads of an uploaded source (import, flow
// nodes' files): they would read the server's disk.
func noImports(path string) ([]byte, error) {
	return nil, fmt.Errorf("an uploaded workflow cannot read %q: imports and flow files are not available through the API; deploy the compiled IR (wfc build) instead", path)
}

// compileUpload compiles a source or decodes an IR. On failure it writes
// the problem and returns nil.
func (s *Server) compileUpload(w http.ResponseWriter, r *http.Request, source, file string, irDoc json.RawMessage) (*ir.Workflow, diag.List) {
	switch {
	case source != "" && len(irDoc) > 0:
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "give either source or ir, not both")
		return nil, nil
	case len(irDoc) > 0:
		wf, err := ir.Decode(irDoc)
		if err != nil {
			writeProblem(w, r, http.StatusUnprocessableEntity, "invalid", "the IR does not decode: "+err.Error())
			return nil, nil
		}
		if probs := ir.Validate(wf); len(probs) > 0 {
			writeProblem(w, r, http.StatusUnprocessableEntity, "invalid", "invalid IR: "+ir.Problems(probs).Error())
			return nil, nil
		}
		return wf, diag.List{}
	case source != "":
		if file == "" {
			file = "workflow.wf"
		}
		res := compiler.Compile(file, []byte(source), compiler.Config{ReadFile: noImports})
		diags := res.Diags
		if diags == nil {
			diags = diag.List{}
		}
		if res.IR == nil || diags.HasErrors() {
			writeProblemDoc(w, r, &Problem{Status: http.StatusUnprocessableEntity, Type: "invalid-source",
				Detail: fmt.Sprintf("%s has %d errors", file, diags.Count(diag.Error)), Diagnostics: diags})
			return nil, nil
		}
		return res.IR, diags
	}
	writeProblem(w, r, http.StatusBadRequest, "bad-request", "give the workflow as source (a .wf source) or ir (an IR document)")
	return nil, nil
}

func (s *Server) deployWorkflow(w http.ResponseWriter, r *http.Request) {
	var req deployRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Tag != "" && !validTag(req.Tag) {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "a tag is 1 to 64 of [A-Za-z0-9_.:-] and not a hash")
		return
	}
	wf, diags := s.compileUpload(w, r, req.Source, req.File, req.IR)
	if wf == nil {
		return
	}
	v, err := s.wf.Deploy(r.Context(), wf, req.Tag, principalOf(r.Context()).Subject)
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, workflowResponse{Hash: v.Hash, Name: wf.Name, Tag: v.Tag, Version: v.Version, Diagnostics: diags})
}

// listWorkflows lists the tags, each with its current version.
func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tags, err := s.wf.Tags(ctx)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	list := make([]runtime.Version, 0, len(tags))
	for _, t := range tags {
		vs, err := s.wf.Versions(ctx, t)
		if err != nil || len(vs) == 0 {
			s.internal(w, r, fmt.Errorf("tag %s: %v", t, err))
			return
		}
		list = append(list, vs[len(vs)-1])
	}
	writeJSON(w, http.StatusOK, map[string]any{"tags": list})
}

// getWorkflow returns the IR a hash or a tag's current version names.
func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	wf, v, err := s.wf.Get(r.Context(), r.PathValue("ref"))
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	data, err := ir.Marshal(wf)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, workflowResponse{Hash: v.Hash, Name: wf.Name, Tag: v.Tag, Version: v.Version, Diagnostics: diag.List{}, IR: data})
}

// workflowVersions lists a tag's versions, oldest first.
func (s *Server) workflowVersions(w http.ResponseWriter, r *http.Request) {
	vs, err := s.wf.Versions(r.Context(), r.PathValue("tag"))
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"versions": vs})
}

// decodeBody decodes a JSON request body into v: one JSON object, no
// unknown fields, at most MaxBodyBytes. On failure it writes the problem.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeProblem(w, r, http.StatusUnsupportedMediaType, "unsupported-media", "the body is application/json, not "+ct)
			return false
		}
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeProblem(w, r, http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("the body is over the limit of %d bytes", mbe.Limit))
			return false
		}
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "reading the body: "+err.Error())
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "the body is not the JSON object expected: "+err.Error())
		return false
	}
	if dec.More() {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "the body holds more than one JSON value")
		return false
	}
	return true
}

// internal answers 500 and logs err (the client sees no detail).
func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("wfc serve: internal error", "method", r.Method, "path", logPath(r), "err", err)
	writeProblem(w, r, http.StatusInternalServerError, "internal", "the server failed; its log says why")
}

// runtimeError maps a runtime error to a problem. The runtime's errors are
// messages for people; the ones a client may cause are recognised by
// their sentinel or wording.
func (s *Server) runtimeError(w http.ResponseWriter, r *http.Request, err error) {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "runtime: ")
	var ie *runtime.InputError
	switch {
	case errors.Is(err, runtime.ErrUnknownRun), errors.Is(err, runtime.ErrUnknownWorkflow), errors.Is(err, runtime.ErrUnknownTag),
		strings.Contains(msg, "is not stored"):
		writeProblem(w, r, http.StatusNotFound, "not-found", msg)
	case errors.As(err, &ie):
		writeProblemDoc(w, r, &Problem{Status: http.StatusUnprocessableEntity, Type: "invalid", Detail: "the inputs do not fit the workflow", Errors: ie.Problems})
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeProblem(w, r, http.StatusServiceUnavailable, "unavailable", "the request was cancelled or timed out")
	case isNotFound(msg):
		writeProblem(w, r, http.StatusNotFound, "not-found", msg)
	case isConflict(msg):
		writeProblem(w, r, http.StatusConflict, "conflict", msg)
	case isForbiddenDecider(msg):
		writeProblem(w, r, http.StatusForbidden, "forbidden", msg)
	case isClientMistake(msg):
		writeProblem(w, r, http.StatusUnprocessableEntity, "invalid", msg)
	default:
		s.internal(w, r, err)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func isConflict(msg string) bool {
	return containsAny(msg, "its approvals are closed", "takes no more signals", ", not running",
		"only a failed or cancelled run can be retried", "still compensating", "is closed", "signals for nodes it has not reached")
}

func isForbiddenDecider(msg string) bool {
	return containsAny(msg, "is not an approver", "is an escalation approver")
}

func isNotFound(msg string) bool {
	return containsAny(msg, "unknown run", "no approval ", "has no node", "unknown node")
}

func isClientMistake(msg string) bool {
	return containsAny(msg, "not a human node", "waits for", "takes signal", "is not JSON", "not a JSON object", "the payload", "a signal's", "signal name",
		"field", "invalid run id", "is required", "at most", "does not fit", "over the limit", "bad event id")
}
