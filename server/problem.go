package server

import (
	"encoding/json"
	"net/http"
)

// A Problem is an RFC 9457 problem details document. Extensions are
// members of its own: Diagnostics (a deployment's compiler diagnostics, as
// `wfc build --json` reports them) and Errors (the problems of the inputs).
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Code is the problem type's slug (the fragment of Type), for clients
	// to branch on; the remote task queue's problems carry it too.
	Code string `json:"code"`
	// Diagnostics are the compiler's diagnostics of a refused source.
	Diagnostics any `json:"diagnostics,omitempty"`
	// Errors are the problems found in a request's inputs, or the
	// reasons a run's live state refuses a patch.
	Errors []string `json:"errors,omitempty"`
	// Pointer is the JSON pointer (RFC 6901) into the IR at which a patch
	// failed, and Operation the index of its operation.
	Pointer   string `json:"pointer,omitempty"`
	Operation *int   `json:"operation,omitempty"`
}

// problemBase is the namespace of the problem types; each names a section
// of docs/api.md.
const problemBase = "https://wfc-lang.github.io/wfc/docs/api#"

// problemTitles are the stable titles of the problem types.
var problemTitles = map[string]string{
	"bad-request":        "Bad request",
	"unauthorized":       "Missing or invalid bearer token",
	"forbidden":          "The token lacks the scope for this operation",
	"not-found":          "Not found",
	"method-not-allowed": "Method not allowed",
	"conflict":           "Conflict with the run's state",
	"gone":               "Gone",
	"too-large":          "Request body too large",
	"unsupported-media":  "Unsupported media type",
	"invalid":            "Invalid request",
	"invalid-source":     "The workflow has errors",
	"idempotency":        "Idempotency-Key reused for another workflow",
	"too-many-streams":   "Too many event streams",
	"unavailable":        "Service unavailable",
	"internal":           "Internal error",
	"patch-invalid":      "The patch does not apply or the patched workflow does not check",
	"patch-refused":      "The run's live state refuses the patch",
}

func writeProblem(w http.ResponseWriter, r *http.Request, status int, kind, detail string) {
	writeProblemDoc(w, r, &Problem{Status: status, Type: kind, Detail: detail})
}

func writeProblemDoc(w http.ResponseWriter, r *http.Request, p *Problem) {
	p.Title = problemTitles[p.Type]
	p.Code = p.Type
	p.Type = problemBase + p.Type
	if r != nil {
		p.Instance = r.URL.Path
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="wfc"`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
