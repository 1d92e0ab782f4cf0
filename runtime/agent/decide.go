package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// A Decision is what an agent node decided: its output (docs/agents.md,
// "Output"), recorded once per execution before the runtime routes on it.
type Decision struct {
	// Route is the first chosen route ("" when none was); Routes all of
	// them, in the allow-list's spelling and the answer's order.
	Route  string   `json:"route"`
	Routes []string `json:"routes"`
	// Defaulted: the answer named no allowed route (or too many) and the
	// node took its default; Problem says what was wrong with the answer.
	Defaulted bool   `json:"defaulted"`
	Problem   string `json:"problem,omitempty"`
	// Text is the answer's text (a routing agent's reasoning when the
	// model answered through the decide function).
	Text      string `json:"text"`
	Reasoning string `json:"reasoning"`
	Model     string `json:"model"`
	// PromptHash is "sha256:<hex>" of the rendered prompt: the prompt
	// itself is not stored.
	PromptHash string `json:"prompt_hash"`
	Usage      Usage  `json:"usage"`
	ToolCalls  int    `json:"tool_calls"`
}

// An answer is a routing answer read from a model's reply.
type answer struct {
	names     []string
	reasoning string
}

// parseAnswer reads the route names and reasoning from a model's reply:
// a JSON object (alone, in a ``` fence or with text around it) with
// "routes" or "route" (a string or a list; "next_nodes" too, as seed 000
// writes it) and "reasoning"; or, failing JSON, a reply that is a single
// word (quotes, backticks and a final period ignored). ok is false when
// the reply is neither.
func parseAnswer(reply string) (a answer, ok bool) {
	if obj := findObject(reply); obj != nil {
		for k, v := range obj {
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "routes", "route", "next_nodes", "next", "choice", "choices":
				a.names = append(a.names, stringsOf(v)...)
				ok = true
			case "reasoning", "reason", "explanation":
				var s string
				if json.Unmarshal(v, &s) == nil {
					a.reasoning = s
				}
			}
		}
		return a, ok
	}
	w := strings.TrimSuffix(strings.TrimSpace(reply), ".")
	w = strings.TrimSpace(strings.Trim(w, "\"'`"))
	if w == "" || strings.ContainsAny(w, " \t\r\n{}[],:") {
		return a, false
	}
	return answer{names: []string{w}}, true
}

// findObject returns the first JSON object of s: s itself, or the span
// from its first '{' to the last '}' that decodes.
func findObject(s string) map[string]json.RawMessage {
	var obj map[string]json.RawMessage
	s = strings.TrimSpace(s)
	if json.Unmarshal([]byte(s), &obj) == nil && obj != nil {
		return obj
	}
	start := strings.IndexByte(s, '{')
	for start >= 0 {
		for end := strings.LastIndexByte(s, '}'); end > start; end = strings.LastIndexByte(s[:end], '}') {
			d := json.NewDecoder(bytes.NewReader([]byte(s[start : end+1])))
			if d.Decode(&obj) == nil && obj != nil {
				return obj
			}
		}
		next := strings.IndexByte(s[start+1:], '{')
		if next < 0 {
			break
		}
		start += 1 + next
	}
	return nil
}

// stringsOf reads a string or a list of strings (other items ignored).
func stringsOf(v json.RawMessage) []string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return []string{s}
	}
	var list []json.RawMessage
	if json.Unmarshal(v, &list) != nil {
		return nil
	}
	var out []string
	for _, item := range list {
		if json.Unmarshal(item, &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// resolve maps the answer's names onto the allow-list: exact first, then
// ignoring case and surrounding whitespace (when that is unambiguous).
// A name outside the list, no name at all, or more than max names is an
// error saying which.
func resolve(names, allow []string, max int) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, raw := range names {
		name := strings.TrimSpace(raw)
		got := ""
		for _, r := range allow {
			if r == name {
				got = r
				break
			}
		}
		if got == "" {
			for _, r := range allow {
				if strings.EqualFold(r, name) {
					if got != "" { // two routes differ only in case: refuse to guess
						got = ""
						break
					}
					got = r
				}
			}
		}
		if got == "" {
			return nil, fmt.Errorf("the answer names %q, which is not one of the routes (%s)", clip(raw, 80), strings.Join(allow, ", "))
		}
		if !seen[got] {
			seen[got] = true
			out = append(out, got)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the answer names no route (want one of %s)", strings.Join(allow, ", "))
	}
	if max < 1 {
		max = 1
	}
	if len(out) > max {
		return nil, fmt.Errorf("the answer names %d routes (%s), but the node allows at most %d", len(out), strings.Join(out, ", "), max)
	}
	return out, nil
}
