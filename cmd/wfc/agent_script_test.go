package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// crmWorker is the test program crmworker: a worker of the Redis in
// $WFC_REDIS (3 shards) that provides examples/lead.wf's custom handler
// crm.lookup, as a deployment's own worker would. Lead "L-small" is a
// small company; any other lead a big one. It serves until SIGINT/SIGTERM.
func crmWorker() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	eng, err := runtime.Open(ctx, runtime.Options{RedisURL: os.Getenv("WFC_REDIS"), Shards: 3})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crmworker:", err)
		return 1
	}
	defer eng.Close()
	reg := handlers.NewRegistry(handlers.Options{})
	reg.RegisterFunc("crm.lookup", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		var c struct {
			LeadID string `json:"lead_id"`
		}
		if err := json.Unmarshal(req.Config, &c); err != nil {
			return nil, err
		}
		if c.LeadID == "L-small" {
			return json.RawMessage(`{"name":"Tiny Ltd","employees":12,"revenue":50000.0}`), nil
		}
		return json.Marshal(map[string]any{"name": "Acme " + c.LeadID, "employees": 2500, "revenue": 4.2e6})
	})
	eng.StartWorkers(ctx, 2, runtime.WorkerOptions{Handlers: reg, Queues: []string{runtime.HandlerQueue("crm.lookup")}})
	fmt.Fprintln(os.Stderr, "crmworker: serving crm.lookup")
	<-ctx.Done()
	eng.StopWorkers()
	return 0
}

// freeport NAME sets $NAME to a TCP port of 127.0.0.1 that is free now.
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport NAME")
	}
	for range 100 {
		if p := 20000 + rand.IntN(20000); portFree(p) {
			ts.Setenv(args[0], strconv.Itoa(p))
			return
		}
	}
	ts.Fatalf("freeport: no free port found")
}
