// Package tasksapi is the HTTP face of remote tasks (runtime.Remote):
// workers written in any language long-poll for the tasks of the handlers
// they serve, extend their leases with heartbeats, and complete or fail
// the tasks with typed errors (docs/handlers.md).
//
// New returns an http.Handler for the paths under /v1/tasks/; the server
// mounts it and authenticates each request through Config.Authorize (the
// work scope). Errors are RFC 9457 problem+json; bodies are bounded; a
// poll ends when its client goes away. openapi.json holds the paths'
// OpenAPI 3.1 description, for the server's document.
package tasksapi
