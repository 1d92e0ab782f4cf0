package tasksapi

import _ "embed"

// OpenAPI is the OpenAPI 3.1 fragment that describes the /v1/tasks
// paths (openapi.json): the server merges its paths and components into
// its own document.
//
//go:embed openapi.json
var OpenAPI []byte
