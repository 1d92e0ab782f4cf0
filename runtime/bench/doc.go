// Package bench measures the runtime on a Redis server: node executions per
// second and per-hop latency of no-op workflows (a chain, a diamond, a
// 100-wide fan-out/fan-in) with one and several workers, round trips to
// Redis and Redis CPU per node execution, Redis memory per run, and, right
// after each scenario and under its load, a raw go-redis reference (tokens
// passed along chains of streams with one pipelined write per hop) that the
// figures are divided by, since absolute figures on a shared machine mean
// little. `wfc bench` and the package's Go benchmarks call it;
// docs/performance.md records the results.
package bench
