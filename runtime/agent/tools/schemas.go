package tools

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The parameter schemas stay within what OpenAI's function calling
// accepts (type, properties, required, enum, items, description,
// additionalProperties, min/max). Each step's own fields are checked by
// the step itself, with messages that name the step.
var schemas = map[string]string{
	ExecutePipeline: `{
  "type": "object",
  "properties": {
    "input": {"description": "The data the first step reads: any JSON value, or {\"$ref\": \"sha256:...\"} naming a stored result."},
    "steps": {
      "type": "array", "minItems": 1,
      "description": "Steps run in order; each reads the previous step's result (or, with from: N, the input (0) or step N's result).",
      "items": {
        "type": "object",
        "properties": {
          "step": {"type": "string", "enum": ["http_request", "table_sort", "table_filter", "table_select", "top_k", "groupby", "join", "jq_transform", "regex_extract", "parse_date"]},
          "from": {"type": "integer", "minimum": 0}
        },
        "required": ["step"]
      }
    }
  },
  "required": ["steps"],
  "additionalProperties": false
}`,
	SearchTools: `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 500, "description": "Words to look for in the names and descriptions of handlers and workflows."},
    "kind": {"type": "string", "enum": ["handler", "workflow"], "description": "Only this kind."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 50}
  },
  "required": ["query"],
  "additionalProperties": false
}`,
	OpenAPIAction: `{
  "type": "object",
  "properties": {
    "api": {"type": "string", "description": "The API's title as listed in this tool's description (needed only when several APIs have the operation)."},
    "operation_id": {"type": "string", "minLength": 1, "maxLength": 200},
    "params": {"type": "object", "description": "The operation's path, query and header parameters, by name."},
    "body": {"description": "The JSON request body, when the operation takes one."}
  },
  "required": ["operation_id"],
  "additionalProperties": false
}`,
	DelegateToAgent: `{
  "type": "object",
  "properties": {
    "kind": {"type": "string", "enum": ["workflow", "agent"], "description": "Start a workflow as a child flow, or another agent's job."},
    "target": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The workflow's or the agent's name (search_tools finds them)."},
    "inputs": {"type": "object", "description": "The child's inputs."},
    "wait": {"type": "boolean", "description": "Wait for the child's result (within this call's time bound); else return once it started."}
  },
  "required": ["kind", "target"],
  "additionalProperties": false
}`,
	PatchWorkflow: `{
  "type": "object",
  "properties": {
    "operations": {
      "type": "array", "minItems": 1, "maxItems": 64,
      "description": "JSON Patch operations: only {\"op\": \"add\", \"path\": \"/nodes/-\", \"value\": NODE} and {\"op\": \"add\", \"path\": \"/edges/-\", \"value\": {\"from\": ID, \"to\": ID}} whose edges start at this agent or at a node the same patch adds.",
      "items": {
        "type": "object",
        "properties": {
          "op": {"type": "string", "enum": ["add"]},
          "path": {"type": "string", "enum": ["/nodes/-", "/edges/-"]},
          "value": {"type": "object"}
        },
        "required": ["op", "path", "value"],
        "additionalProperties": false
      }
    },
    "description": {"type": "string", "maxLength": 500, "description": "Why, for the run's history."}
  },
  "required": ["operations"],
  "additionalProperties": false
}`,
}

func schemaOf(name string) json.RawMessage { return json.RawMessage(schemas[name]) }

// descriptionOf is what the model reads about a tool.
func descriptionOf(name string, w *Worker) string {
	switch name {
	case ExecutePipeline:
		return `Run a pipeline of data steps over JSON and return the last step's result (a large one comes back as {"$ref": "sha256:..."}, usable as a later pipeline's input or a join's right). Steps ({"step": NAME, ...}):
http_request {url, method?, headers?, query?, body?} (allow-listed hosts only: ` + w.policy.describe() + `);
table_sort {field, order?: asc|desc} or {by: [{field, order}]};
table_filter {where: [{field, op, value}], any?} (op: eq ne lt lte gt gte in not_in contains starts_with ends_with matches exists not_exists);
table_select {fields: [..], rename?: {old: new}};
top_k {k, by?, order?: desc|asc};
groupby {by: field or [fields], aggregates: [{op: count|sum|avg|min|max|first|last|count_distinct|collect, field, as?}]};
join {right: array | {"$ref"} | {"$step": N}, on: field(s) or left_on/right_on, type?: inner|left};
jq_transform {program, all?};
regex_extract {pattern (Go RE2), field?, into?, all?};
parse_date {field?, into?, formats?, timezone?, output?: rfc3339|unix|unix_ms|date|Go layout, output_timezone?, on_error?: fail|null}.
Fields may be dotted paths (a.b.c). Any step takes from: N to read the input (0) or step N's result instead of the previous one.`
	case SearchTools:
		return "Search the handlers and workflows this deployment knows by words of their names and descriptions; returns the best matches with their kind, name, description and inputs."
	case OpenAPIAction:
		return "Call an operation of an allow-listed OpenAPI API by its operationId; parameters and body are checked against the operation before sending. " + w.describeAPIs()
	case DelegateToAgent:
		s := "Start a workflow as a child flow, or another agent's job, with inputs; optionally wait for its result."
		if len(w.delegate) > 0 {
			s += " Allowed targets: " + strings.Join(w.delegate, ", ") + "."
		}
		return s
	case PatchWorkflow:
		return "Add nodes, and edges from this agent (or from nodes the same patch adds) to them, to the running workflow. Nothing else can be changed."
	}
	return fmt.Sprintf("tool %s", name)
}
