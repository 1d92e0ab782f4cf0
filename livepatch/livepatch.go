package livepatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/runtime"
)

// A Request asks for a patch of one run: Patch, an RFC 6902 document
// against the run's current IR, or From, the workflow the run should
// become (the patch is ir.Diff of the two). By is recorded with the patch.
type Request struct {
	Run    string
	Patch  []byte
	From   *ir.Workflow
	By     string
	DryRun bool
}

// A Result is what a patch did, or would do for a dry run: the runtime's
// report, and the patch applied (computed, for From).
type Result struct {
	*runtime.PatchResult
	Patch json.RawMessage `json:"patch"`
	// Unchanged: the run already runs that workflow; nothing was done.
	Unchanged bool `json:"unchanged,omitempty"`
}

// A CheckError is a patched workflow the compiler's checks refuse
// (compiler.CheckIR): the run is untouched.
type CheckError struct{ Diags []diag.Diagnostic }

func (e *CheckError) Error() string {
	var b strings.Builder
	b.WriteString("the patched workflow does not check:")
	for _, d := range e.Diags {
		b.WriteString("\n\t")
		b.WriteString(string(d.Code))
		b.WriteString(": ")
		b.WriteString(d.Message)
	}
	return b.String()
}

// maxConflicts bounds how often Apply recomputes a patch that lost a race
// with another patch of the same run.
const maxConflicts = 50

// Build applies patch to w and checks the result as a build would: the
// IR's structure (ir.ApplyPatch) and its expressions' types
// (compiler.CheckIR). Errors are *ir.PatchError or *CheckError.
func Build(w *ir.Workflow, patch []byte) (*ir.Workflow, error) {
	nw, err := ir.ApplyPatch(w, patch)
	if err != nil {
		return nil, err
	}
	var errs []diag.Diagnostic
	for _, d := range compiler.CheckIR(nw) {
		if d.Severity == diag.Error {
			errs = append(errs, d)
		}
	}
	if len(errs) > 0 {
		return nil, &CheckError{Diags: errs}
	}
	return nw, nil
}

// Apply patches a run: against its current workflow, checked as a build,
// then against its live state and written atomically by the runtime. A
// patch that lost a race with another patch of the run is recomputed
// against the new version (its test operations guard index-based paths).
// Errors: *ir.PatchError, *CheckError, *runtime.PatchRefusedError, or the
// runtime's; in every case the run is unchanged.
func Apply(ctx context.Context, eng *runtime.Engine, req Request) (*Result, error) {
	if (req.Patch == nil) == (req.From == nil) {
		return nil, errors.New("livepatch: give a patch or a workflow to patch to, not both or neither")
	}
	for try := 0; ; try++ {
		cur, err := eng.RunWorkflow(ctx, req.Run)
		if err != nil {
			return nil, err
		}
		if cur.Status != runtime.RunRunning {
			return nil, &runtime.PatchRefusedError{Run: req.Run, Reasons: []string{fmt.Sprintf("the run is %s: only a running run can be patched", cur.Status)}}
		}
		patch := req.Patch
		if req.From != nil {
			if patch, err = ir.Diff(cur.Workflow, req.From); err != nil {
				return nil, err
			}
		}
		nw, err := Build(cur.Workflow, patch)
		if err != nil {
			return nil, err
		}
		if h, err := ir.Hash(nw); err == nil && h == cur.Hash {
			return &Result{PatchResult: &runtime.PatchResult{Run: req.Run, OldHash: cur.Hash, NewHash: h, Version: cur.Version, DryRun: req.DryRun},
				Patch: patch, Unchanged: true}, nil
		}
		res, err := eng.Patch(ctx, runtime.PatchRequest{Run: req.Run, Base: cur.Hash, New: nw, Patch: patch, By: req.By, DryRun: req.DryRun})
		if errors.Is(err, runtime.ErrPatchConflict) && try < maxConflicts {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Result{PatchResult: res, Patch: patch}, nil
	}
}

// An Outcome is what AllRunning did to one run: Result, or Err when the
// run refused (or could not take) the patch.
type Outcome struct {
	Run    string
	Result *Result
	Err    error
}

// AllRunning patches every running run of a tag (runtime.SubmitTag) to
// the workflow to, where it is safe; the others keep running unchanged and
// their outcome says why.
func AllRunning(ctx context.Context, eng *runtime.Engine, tag string, to *ir.Workflow, by string, dry bool) ([]Outcome, error) {
	runs, err := eng.TagRuns(ctx, tag)
	if err != nil {
		return nil, err
	}
	var out []Outcome
	for _, st := range runs {
		if st.State != runtime.RunRunning {
			continue
		}
		res, err := Apply(ctx, eng, Request{Run: st.RunID, From: to, By: by, DryRun: dry})
		out = append(out, Outcome{Run: st.RunID, Result: res, Err: err})
	}
	return out, nil
}

// Downstream is the agent's patch lane (the patch_workflow tool): it
// applies a patch that only adds nodes (`add /nodes/-`) and edges (`add
// /edges/-`) behind node — every added edge starts at node or at a node
// the patch adds, and ends at a node the patch adds — plus test
// operations. Anything else is refused before the run is read.
func Downstream(ctx context.Context, eng *runtime.Engine, run, node string, patch []byte, by string) (*Result, error) {
	if err := downstreamOnly(node, patch); err != nil {
		return nil, err
	}
	patch, err := declareBuiltins(ctx, eng, run, patch)
	if err != nil {
		return nil, err
	}
	return Apply(ctx, eng, Request{Run: run, Patch: patch, By: by})
}

// declareBuiltins adds to an agent's patch the declarations of the
// built-in handlers (echo, cel, http, ...) its new nodes run and the run's
// IR does not declare yet, each at its place in the sorted /handlers: a
// model writes the node, as the language lets a workflow `run` a built-in
// without declaring it.
func declareBuiltins(ctx context.Context, eng *runtime.Engine, run string, patch []byte) ([]byte, error) {
	var ops []json.RawMessage
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, &ir.PatchError{Op: -1, Msg: "a patch is a JSON array of operations (RFC 6902): " + err.Error()}
	}
	builtins := compiler.Builtins()
	want := map[string]bool{}
	for _, raw := range ops {
		var o struct {
			Op, Path string
			Value    struct {
				Handler string `json:"handler"`
			}
		}
		if json.Unmarshal(raw, &o) == nil && o.Op == "add" && o.Path == "/nodes/-" && builtins[o.Value.Handler] != nil {
			want[o.Value.Handler] = true
		}
	}
	if len(want) == 0 {
		return patch, nil
	}
	cur, err := eng.RunWorkflow(ctx, run)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cur.Workflow.Handlers))
	for _, h := range cur.Workflow.Handlers {
		names = append(names, h.Name)
		delete(want, h.Name)
	}
	var adds []json.RawMessage
	for _, name := range slices.Sorted(maps.Keys(want)) {
		b := builtins[name]
		h := ir.Handler{Name: name, Builtin: true, Config: ir.Type{Kind: ir.KindAny}, Output: ir.Type{Kind: ir.KindAny}}
		if !b.Open {
			h.Config, h.Output = *b.Config, *b.Output
		}
		i, _ := slices.BinarySearch(names, name)
		names = slices.Insert(names, i, name)
		op, err := json.Marshal(map[string]any{"op": "add", "path": fmt.Sprintf("/handlers/%d", i), "value": h})
		if err != nil {
			return nil, err
		}
		adds = append(adds, op)
	}
	return json.Marshal(append(adds, ops...))
}

func downstreamOnly(node string, patch []byte) error {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return &ir.PatchError{Op: -1, Msg: "a patch is a JSON array of operations (RFC 6902): " + err.Error()}
	}
	added := map[string]bool{}
	for _, o := range ops {
		if o.Op == "add" && o.Path == "/nodes/-" {
			var n struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(o.Value, &n) == nil && n.ID != "" {
				added[n.ID] = true
			}
		}
	}
	for i, o := range ops {
		switch {
		case o.Op == "test":
		case o.Op == "add" && o.Path == "/nodes/-":
		case o.Op == "add" && o.Path == "/edges/-":
			var e ir.Edge
			if err := json.Unmarshal(o.Value, &e); err != nil {
				return &ir.PatchError{Op: i, Path: o.Path, Msg: "not an edge: " + err.Error()}
			}
			if e.From != node && !added[e.From] {
				return &ir.PatchError{Op: i, Path: o.Path + "/from", Msg: fmt.Sprintf("an agent's patch adds edges from %s or from the nodes it adds, not from %s", node, e.From)}
			}
			if !added[e.To] {
				return &ir.PatchError{Op: i, Path: o.Path + "/to", Msg: fmt.Sprintf("an agent's patch adds edges to the nodes it adds, not to %s", e.To)}
			}
		default:
			return &ir.PatchError{Op: i, Path: o.Path, Msg: fmt.Sprintf("an agent's patch only adds nodes (add /nodes/-) and edges (add /edges/-) behind %s, not %s %s", node, o.Op, o.Path)}
		}
	}
	return nil
}
