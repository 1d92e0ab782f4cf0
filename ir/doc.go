// Package ir defines the intermediate representation of a wfc workflow: the
// JSON document the compiler writes and the runtime executes.
//
// A Workflow lists its nodes and, in Edges, every edge between them; those
// are the source of truth. Analyze derives what the runtime needs at each
// step from them (topological order, entries, terminals, join bookkeeping,
// which nodes may be skipped, loop bodies), so the compiler, the runtime and
// the live-patch applier all agree on one computation. Validate checks a
// document without its source; Decode and DecodeYAML read documents
// strictly and within limits, because the runtime also accepts IR from
// outside (live patches, stored runs). Marshal writes a stable encoding and
// Hash a content address that ignores source locations. ApplyPatch applies
// an RFC 6902 patch (a live patch, docs/patching.md) within limits and
// returns the decoded, analyzed and validated result; Diff makes the patch
// between two workflows, with test operations guarding each index.
//
// The format is described in docs/ir.md and by the JSON Schema in Schema.
// The package is a leaf: it imports only the standard library, go-yaml,
// jsonschema and json-patch.
package ir
