// Command testworker is a wfc worker for the runtime's crash tests: it
// serves the default queue of a Redis with a "block" handler that writes a
// marker file and then blocks until the process is killed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

func main() {
	url := flag.String("redis", "", "Redis URL")
	prefix := flag.String("prefix", "wf", "key prefix")
	marker := flag.String("marker", "", "file written when a block handler starts")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := runtime.Open(ctx, runtime.Options{RedisURL: *url, Prefix: *prefix, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer e.Close()
	reg := handlers.NewRegistry(handlers.Options{})
	reg.RegisterFunc("block", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		if *marker != "" {
			os.WriteFile(*marker, []byte(req.IdempotencyKey), 0o644)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	w := e.NewWorker(runtime.WorkerOptions{
		Handlers: reg, Concurrency: 4, Block: 200 * time.Millisecond,
		VisibilityTimeout: 1500 * time.Millisecond, ClaimInterval: 200 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond, TimerInterval: 20 * time.Millisecond, Logger: log,
	})
	w.Run(ctx)
}
