// Package redisproc starts real redis-server processes on free loopback
// ports: a single server (optionally with the append-only file on, or a
// password), or a Redis Cluster of masters without replicas, and kills and
// restarts them. The test harness (runtime/internal/redistest) and
// `wfc bench --cluster-masters` (runtime/bench) both use it; it imports no
// testing package so that the bench, which ships in the binary, can.
//
// Every server runs without persistence to disk unless asked (save "" and
// appendonly no), binds 127.0.0.1 only, and, on Linux, dies with the
// process that started it, even when that process is killed before it
// could stop the server.
package redisproc
