// Package livepatch applies live patches to running workflow runs: it
// wires the three rooms a patch needs (docs/patching.md). ir.ApplyPatch
// turns an RFC 6902 patch into a new, decoded and validated IR;
// compiler.CheckIR types its expressions as a build does; and
// runtime.Engine.Patch checks the result against the run's live state and
// writes it in one script. ir.Diff makes the patch from a new version of
// the source.
//
// The CLI (wfc patch) and the HTTP server call Apply and AllRunning; the
// agent's patch_workflow tool calls Downstream, which only adds nodes and
// edges behind the agent's node.
package livepatch
