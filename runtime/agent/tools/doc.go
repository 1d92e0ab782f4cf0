// Package tools implements the tools an agent node's model may call
// (docs/agent-tools.md): execute_pipeline (ten data primitives over JSON),
// search_tools, openapi_action, delegate_to_agent and patch_workflow.
//
// The package knows nothing of Redis or of the runtime: what a tool needs
// from the deployment (a content-addressed BlobStore for large results, a
// Catalog of handlers and workflows, a Delegator that starts child work, a
// Patcher that applies live patches) comes in as interfaces the runtime
// implements. A Worker is built once per worker process from its Config
// (the http and OpenAPI allow-lists and the limits); Worker.For builds the
// tools of one agent execution from the node's declared allow-list.
//
// Every call is bounded: the arguments' size and nesting, their validity
// against the tool's JSON Schema, the wall time, and the result's size.
// A failing call returns an *Error whose message is written for the model
// to read and act on; ErrorResult renders one as the tool's result.
package tools
