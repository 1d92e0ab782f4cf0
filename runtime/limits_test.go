package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestLimitEmbeddedRedisRequiresAuth: the embedded server of wfc run
// listens on a loopback port; another process of the machine that
// connects without its random password gets nothing (issue #14, item 7:
// it could submit exec runs to this process's workers).
func TestLimitEmbeddedRedisRequiresAuth(t *testing.T) {
	ctx := context.Background()
	e, err := Open(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	addr := e.mini.Addr()
	if strings.Contains(e.RedisAddr(), "@") || strings.Contains(e.RedisAddr(), e.mini.Addr()+":") {
		t.Errorf("RedisAddr %q shows the password", e.RedisAddr())
	}
	for _, pw := range []string{"", "guess"} {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: pw, MaxRetries: -1})
		err := c.Ping(ctx).Err()
		c.Close()
		if err == nil {
			t.Errorf("PING with password %q was answered", pw)
		}
		// Nor can a client read or write anything.
		c = redis.NewClient(&redis.Options{Addr: addr, Password: pw, MaxRetries: -1})
		if err := c.Set(ctx, "x", "1", 0).Err(); err == nil {
			t.Errorf("SET with password %q worked", pw)
		}
		c.Close()
	}
	// The engine itself works.
	if _, err := e.Status(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "unknown") && !strings.Contains(err.Error(), "not") {
		t.Errorf("status of an unknown run: %v", err)
	}
}
