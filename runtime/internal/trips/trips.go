// Package trips counts round trips to Redis with a go-redis hook: one per
// command, one per pipeline however many commands it carries. The engine
// counts its workers' trips with it, and the benchmark its reference's.
package trips

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A Counter is a go-redis hook; add it to clients with AddHook.
type Counter struct{ n atomic.Int64 }

// Load returns the round trips counted so far.
func (c *Counter) Load() int64 { return c.n.Load() }

// DialHook leaves dialing alone.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

// ProcessHook counts a command.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline once.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}
