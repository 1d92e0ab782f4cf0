// Package server is `wfc serve`: an HTTP API over the runtime (package
// runtime) for deploying workflows, submitting and following runs,
// deciding approvals and sending signals, for clients in any language.
//
// A Server is an http.Handler. Several servers may share one Redis behind
// a load balancer: they keep no state of their own beyond the open event
// streams. Every request but /healthz, /readyz, /openapi.json and a
// completion (whose token is its credential) carries a bearer token
// (Tokens) whose scopes allow the operation; errors are RFC 9457
// problem+json documents. The API is specified by openapi.json (served at
// /openapi.json), and the tests check every request and response against
// it. docs/api.md documents the API and its security model.
//
// The server imports the compiler (to compile uploaded sources) and the
// runtime; nothing imports it, and cmd/wfc wires it up (`wfc serve`).
package server
