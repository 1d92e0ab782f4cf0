package ir

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestSchemaAcceptsValid(t *testing.T) {
	ws := analyzed(t)
	for _, name := range names(ws) {
		b, err := Marshal(ws[name])
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateSchema(b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Documents written by hand may leave out the derived fields.
	b, err := os.ReadFile("testdata/lead_qualification.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "order")
	delete(doc, "entries")
	for _, n := range doc["nodes"].([]any) {
		delete(n.(map[string]any), "dependencies")
		delete(n.(map[string]any), "join_info")
	}
	b, _ = json.Marshal(doc)
	if err := ValidateSchema(b); err != nil {
		t.Errorf("without derived fields: %v", err)
	}
}

// TestSchemaRejects checks that the schema says what Validate says about
// shapes: each document is the golden example with one change.
func TestSchemaRejects(t *testing.T) {
	base, err := os.ReadFile("testdata/lead_qualification.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		old, new string // first occurrence replaced
	}{
		{"unknown field", `"name": "lead_qualification",`, `"name": "lead_qualification", "nam": 1,`},
		{"missing name", `"name": "lead_qualification",`, ``},
		{"empty name", `"name": "lead_qualification"`, `"name": ""`},
		{"version", `"ir_version": "1"`, `"ir_version": "2"`},
		{"node type", `"type": "task"`, `"type": "job"`},
		{"join", `"join": "all"`, `"join": "some"`},
		{"edge kind", `"kind": "after"`, `"kind": "then"`},
		{"task without handler", `"handler": "crm.lookup",`, ``},
		{"task with agent", `"handler": "crm.lookup",`, `"handler": "crm.lookup", "agent": {"model": "m", "prompt": {"const": 1}},`},
		{"type kind", `"kind": "string"`, `"kind": "text"`},
		{"list without elem", `"kind": "map",
        "elem": {
          "kind": "any"
        }`, `"kind": "list"`},
		{"elem on scalar", `"kind": "string"`, `"kind": "string", "elem": {"kind": "int"}`},
		{"value with two", `"expr": {
              "cel": "input.lead_id",`, `"const": 1, "expr": {
              "cel": "input.lead_id",`},
		{"empty cel", `"cel": "input.lead_id"`, `"cel": " "`},
		{"bad id", `"id": "enrich"`, `"id": "en-rich"`},
		{"negative timeout", `"timeout_ms": 30000`, `"timeout_ms": -1`},
		{"zero attempts", `"attempts": 3`, `"attempts": 0`},
		{"backoff", `"backoff": "exponential"`, `"backoff": "random"`},
		{"on_timeout", `"on_timeout": "reject"`, `"on_timeout": "escalate"`},
		{"escalate_to without escalate_after_ms", `"on_timeout": "reject"`, `"on_timeout": "reject", "escalate_to": ["cfo"]`},
		{"escalate_after_ms without escalate_to", `"on_timeout": "reject"`, `"on_timeout": "reject", "escalate_after_ms": 1000`},
		{"null array", `"edges": [`, `"edges": null, "x": [`},
		{"template part with both", `"text": "Route lead "`, `"text": "Route lead ", "expr": {"cel": "x"}`},
		{"no nodes", `"nodes": [`, `"nodes": [], "x": [`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := string(base)
			if !strings.Contains(s, tt.old) {
				t.Fatalf("golden file has no %q", tt.old)
			}
			doc := strings.Replace(s, tt.old, tt.new, 1)
			if err := ValidateSchema([]byte(doc)); err == nil {
				t.Errorf("schema accepted the document")
			}
		})
	}
}

func TestValidateSchemaErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"syntax":   `{"name": }`,
		"too deep": strings.Repeat("[", 100_000),
		"not json": `hello`,
	} {
		if err := ValidateSchema([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSchemaLoaderRefuses(t *testing.T) {
	if _, err := (noLoader{}).Load("file:///etc/passwd"); err == nil {
		t.Error("noLoader loaded a file")
	}
	if _, err := (noLoader{}).Load("https://example.com/schema.json"); err == nil {
		t.Error("noLoader loaded a URL")
	}
	if _, err := compiledSchema(); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaAgreesWithValidate: whatever Validate accepts, the schema accepts.
func TestSchemaAgreesWithValidate(t *testing.T) {
	for name, w := range analyzed(t) {
		if len(Validate(w)) > 0 {
			continue
		}
		b, err := Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateSchema(b); err != nil {
			t.Errorf("%s: Validate accepts but the schema rejects: %v", name, err)
		}
	}
}
