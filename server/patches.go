package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/livepatch"
	"github.com/wfc-lang/wfc/runtime"
)

// A patchRequest patches a run (POST /v1/runs/{run}/patch): Patch, an RFC
// 6902 document against the run's current IR, or the workflow the run
// should become, as FromSource (File names it in diagnostics) or FromIR.
type patchRequest struct {
	Patch      json.RawMessage `json:"patch,omitempty"`
	FromSource string          `json:"from_source,omitempty"`
	FromIR     json.RawMessage `json:"from_ir,omitempty"`
	File       string          `json:"file,omitempty"`
	DryRun     bool            `json:"dry_run,omitempty"`
}

// A patchRunningRequest patches every running run of a tag (POST
// /v1/workflows/{tag}/patch-running) to FromSource or FromIR, or, with
// neither, to the tag's current version.
type patchRunningRequest struct {
	FromSource string          `json:"from_source,omitempty"`
	FromIR     json.RawMessage `json:"from_ir,omitempty"`
	File       string          `json:"file,omitempty"`
	DryRun     bool            `json:"dry_run,omitempty"`
}

// An outcome is what patch-running did to one run: Result, or the problem
// (without type and title: Code says which) of its refusal.
type outcome struct {
	Run     string            `json:"run"`
	Result  *livepatch.Result `json:"result,omitempty"`
	Problem *Problem          `json:"problem,omitempty"`
}

func (s *Server) patchRun(w http.ResponseWriter, r *http.Request) {
	var req patchRequest
	if !decodeBody(w, r, &req) {
		return
	}
	given := 0
	for _, b := range []bool{len(req.Patch) > 0, req.FromSource != "", len(req.FromIR) > 0} {
		if b {
			given++
		}
	}
	if given != 1 {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "give one of patch (an RFC 6902 document), from_source or from_ir")
		return
	}
	lr := livepatch.Request{Run: r.PathValue("run"), By: principalOf(r.Context()).Subject, DryRun: req.DryRun}
	if len(req.Patch) > 0 {
		if t := strings.TrimSpace(string(req.Patch)); !strings.HasPrefix(t, "[") {
			writeProblem(w, r, http.StatusBadRequest, "bad-request", "patch is an RFC 6902 document: a JSON array of operations")
			return
		}
		lr.Patch = req.Patch
	} else {
		to, _ := s.compileUpload(w, r, req.FromSource, req.File, req.FromIR)
		if to == nil {
			return
		}
		lr.From = to
	}
	res, err := livepatch.Apply(r.Context(), s.eng, lr)
	if err != nil {
		p := patchProblem(err)
		if p == nil {
			s.runtimeError(w, r, err)
			return
		}
		writeProblemDoc(w, r, p)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) patchRunning(w http.ResponseWriter, r *http.Request) {
	var req patchRunningRequest
	if !decodeBody(w, r, &req) {
		return
	}
	ctx := r.Context()
	tag := r.PathValue("tag")
	var to *ir.Workflow
	if req.FromSource == "" && len(req.FromIR) == 0 {
		wf, _, err := s.wf.Get(ctx, tag)
		if err != nil || runtime.IsIRHash(tag) {
			if err == nil {
				err = fmt.Errorf("%w %s: patch-running takes a tag", runtime.ErrUnknownTag, tag)
			}
			s.runtimeError(w, r, err)
			return
		}
		to = wf
	} else if to, _ = s.compileUpload(w, r, req.FromSource, req.File, req.FromIR); to == nil {
		return
	}
	if _, err := s.wf.Versions(ctx, tag); err != nil {
		s.runtimeError(w, r, err)
		return
	}
	outs, err := livepatch.AllRunning(ctx, s.eng, tag, to, principalOf(ctx).Subject, req.DryRun)
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	list := make([]outcome, 0, len(outs))
	for _, o := range outs {
		oc := outcome{Run: o.Run, Result: o.Result}
		if o.Err != nil {
			if oc.Problem = patchProblem(o.Err); oc.Problem == nil {
				s.log.Error("wfc serve: patch-running", "run", o.Run, "err", o.Err)
				oc.Problem = &Problem{Status: http.StatusInternalServerError, Type: "internal", Detail: "the server failed; its log says why"}
			}
			oc.Problem.Title = problemTitles[oc.Problem.Type]
			oc.Problem.Code = oc.Problem.Type
			oc.Problem.Type = problemBase + oc.Problem.Type
		}
		list = append(list, oc)
	}
	writeJSON(w, http.StatusOK, map[string]any{"outcomes": list, "dry_run": req.DryRun})
}

// patchProblem is the problem of a refused patch, or nil for an error
// that is not one (the caller maps it as any runtime error).
func patchProblem(err error) *Problem {
	var pe *ir.PatchError
	var ce *livepatch.CheckError
	var re *runtime.PatchRefusedError
	switch {
	case errors.As(err, &pe):
		p := &Problem{Status: http.StatusUnprocessableEntity, Type: "patch-invalid", Detail: pe.Error(), Pointer: pe.Path}
		if pe.Op >= 0 {
			op := pe.Op
			p.Operation = &op
		}
		return p
	case errors.As(err, &ce):
		diags := diag.List(ce.Diags)
		return &Problem{Status: http.StatusUnprocessableEntity, Type: "patch-invalid", Detail: "the patched workflow does not check", Diagnostics: diags}
	case errors.As(err, &re):
		return &Problem{Status: http.StatusConflict, Type: "patch-refused", Detail: "the run's live state refuses the patch; the run is unchanged", Errors: re.Reasons}
	}
	return nil
}
