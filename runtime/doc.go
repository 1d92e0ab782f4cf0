// Package runtime executes compiled wfc workflows (package ir) on Redis.
//
// A run moves tokens along the workflow's edges. Workers read ready tokens
// from Redis streams with consumer groups, run the node's handler (package
// runtime/handlers), and commit each node execution with one Lua script
// that records the output, delivers real or skip tokens to the successors,
// does their join bookkeeping, queues the ready ones, updates the run's
// counter of outstanding work, appends to the run's event log and
// acknowledges the message — atomically, and exactly once per execution
// whatever the number of deliveries. Handlers run at least once; each
// execution carries a stable idempotency key.
//
// The same code runs on a real Redis server and on the embedded in-memory
// server (miniredis) used when no Redis URL is given. docs/runtime.md
// specifies the guarantees, the key layout, the token and event formats and
// the script contract.
//
// Use:
//
//	e, err := runtime.Open(ctx, runtime.Options{RedisURL: url})
//	defer e.Close()
//	run, err := e.Submit(ctx, workflow, inputs)
//	e.StartWorkers(ctx, 8)
//	status, err := e.Wait(ctx, run)
//
// Status, Events, Cancel and Retry (partial retry of a failed run) work on
// any run; Replay rebuilds a run's status from its events. The runtime
// imports ir and never the language front end.
package runtime
