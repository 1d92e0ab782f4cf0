package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/wfc-lang/wfc/runtime"
)

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var list []runtime.Approval
	var err error
	if run := r.URL.Query().Get("run"); run != "" {
		list, err = s.eng.Approvals(ctx, run)
	} else {
		list, err = s.eng.OpenApprovals(ctx)
	}
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	if list == nil {
		list = []runtime.Approval{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}

type decisionRequest struct {
	Approve *bool           `json:"approve"`
	Comment string          `json:"comment,omitempty"`
	Fields  json.RawMessage `json:"fields,omitempty"`
}

// decide decides an approval as the token's subject: the runtime checks
// the subject against the approval's approvers (and escalation approvers).
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	var req decisionRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Approve == nil {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "approve (true or false) is required")
		return
	}
	var fields map[string]any
	if len(req.Fields) > 0 && string(req.Fields) != "null" {
		var err error
		if fields, err = runtime.DecodeInputs(req.Fields); err != nil {
			writeProblem(w, r, http.StatusBadRequest, "bad-request", "fields is a JSON object: "+err.Error())
			return
		}
	}
	run, x := r.PathValue("run"), r.PathValue("x")
	d := runtime.Decision{Approve: *req.Approve, By: principalOf(r.Context()).Subject, Comment: req.Comment, Fields: fields}
	if err := s.eng.Decide(r.Context(), run, x, d); err != nil {
		s.runtimeError(w, r, err)
		return
	}
	list, err := s.eng.Approvals(r.Context(), run)
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	for _, a := range list {
		if a.Exec == x || a.Node == x && a.State != runtime.ApprovalOpen {
			writeJSON(w, http.StatusOK, a)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"run": run, "x": x})
}

type signalRequest struct {
	Name        string          `json:"name"`
	Correlation string          `json:"correlation,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

type signalResponse struct {
	// Taken is the execution that took the signal; "" when the run keeps
	// it for a node that has not started waiting yet.
	Taken string `json:"taken"`
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request) {
	var req signalRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Name == "" {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "name (the signal's name) is required")
		return
	}
	x, err := s.eng.Signal(r.Context(), r.PathValue("run"), req.Name, req.Correlation, req.Payload)
	if err != nil {
		s.runtimeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, signalResponse{Taken: x})
}

// Completion tokens (docs/api.md, "Completing an asynchronous step"): a
// signal task that waits for an external system's answer can be completed
// with a token that names that one step. The token is
//
//	base64url(JSON claim) "." base64url(HMAC-SHA256(key, JSON claim))
//
// where the claim is the run, the execution, the run's generation (partial
// retries), and the signal's name and correlation the step waits for. It
// is the credential of POST /v1/completions/{token}: the system that holds
// it can complete that step and nothing else, and once only (ClaimOnce in
// Redis, atomic across servers). A token of a step that stopped waiting
// (completed, timed out, its run ended or retried) is refused.
type completionClaim struct {
	Run  string `json:"r"`
	X    string `json:"x"`
	Gen  int    `json:"g"`
	Name string `json:"s"`
	Corr string `json:"c,omitempty"`
}

func (s *Server) signClaim(c completionClaim) string {
	data, _ := json.Marshal(c)
	m := hmac.New(sha256.New, s.cfg.CompletionKey)
	m.Write(data)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(data) + "." + enc.EncodeToString(m.Sum(nil))
}

func (s *Server) verifyClaim(tok string) (*completionClaim, bool) {
	if len(tok) > 4096 {
		return nil, false
	}
	a, b, ok := strings.Cut(tok, ".")
	if !ok {
		return nil, false
	}
	enc := base64.RawURLEncoding
	data, err1 := enc.DecodeString(a)
	sig, err2 := enc.DecodeString(b)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	m := hmac.New(sha256.New, s.cfg.CompletionKey)
	m.Write(data)
	if !hmac.Equal(sig, m.Sum(nil)) {
		return nil, false
	}
	var c completionClaim
	if json.Unmarshal(data, &c) != nil {
		return nil, false
	}
	return &c, true
}

type completionTokenRequest struct {
	// X is the execution of the waiting signal task: its node id (plus
	// "@" and the iteration inside loops).
	X string `json:"x"`
}

type completionTokenResponse struct {
	Token string `json:"token"`
	Run   string `json:"run"`
	X     string `json:"x"`
	URL   string `json:"url"`
}

// waitingSignal returns the status of run's execution x when it is a
// signal task waiting for its signal in the run's current generation.
func (s *Server) waitingSignal(w http.ResponseWriter, r *http.Request, run, x string) (*runtime.Status, *runtime.NodeStatus) {
	st, err := s.eng.Status(r.Context(), run)
	if err != nil {
		s.runtimeError(w, r, err)
		return nil, nil
	}
	ns := st.Nodes[x]
	if ns == nil {
		writeProblem(w, r, http.StatusNotFound, "not-found", "run "+run+" has no execution "+strconv.Quote(x))
		return nil, nil
	}
	if st.State != runtime.RunRunning || ns.State != runtime.NodeWaiting || ns.Signal == "" {
		writeProblem(w, r, http.StatusConflict, "conflict", "execution "+x+" of run "+run+" is not waiting for a signal (run "+st.State+", execution "+ns.State+")")
		return nil, nil
	}
	return st, ns
}

func (s *Server) issueCompletion(w http.ResponseWriter, r *http.Request) {
	var req completionTokenRequest
	if !decodeBody(w, r, &req) {
		return
	}
	run := r.PathValue("run")
	if req.X == "" {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "x (the waiting execution) is required")
		return
	}
	st, ns := s.waitingSignal(w, r, run, req.X)
	if st == nil {
		return
	}
	tok := s.signClaim(completionClaim{Run: run, X: req.X, Gen: st.Gen, Name: ns.Signal, Corr: ns.Correlation})
	writeJSON(w, http.StatusCreated, completionTokenResponse{Token: tok, Run: run, X: req.X, URL: "/v1/completions/" + tok})
}

type completionRequest struct {
	Payload json.RawMessage `json:"payload,omitempty"`
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, ok := s.verifyClaim(r.PathValue("token"))
	if !ok {
		writeProblem(w, r, http.StatusUnauthorized, "unauthorized", "the completion token is not one this deployment issued")
		return
	}
	var req completionRequest
	if !decodeBody(w, r, &req) {
		return
	}
	st, ns := s.waitingSignal(w, r, c.Run, c.X)
	if st == nil {
		return
	}
	if st.Gen != c.Gen || ns.Signal != c.Name || ns.Correlation != c.Corr {
		writeProblem(w, r, http.StatusGone, "gone", "the step this token completes waits no more (the run was retried)")
		return
	}
	once := "completion:" + c.X + ":" + strconv.Itoa(c.Gen)
	first, err := s.eng.ClaimOnce(ctx, c.Run, once)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !first {
		writeProblem(w, r, http.StatusConflict, "conflict", "this completion token was used already")
		return
	}
	x, err := s.eng.Signal(ctx, c.Run, c.Name, c.Corr, req.Payload)
	if err != nil {
		// Nothing changed: the token may be used again.
		if rerr := s.eng.ReleaseOnce(ctx, c.Run, once); rerr != nil {
			s.log.Error("wfc serve: releasing a completion claim", "run", c.Run, "err", rerr)
		}
		s.runtimeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, signalResponse{Taken: x})
}
