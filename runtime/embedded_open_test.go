package runtime

import (
	"context"
	"testing"
	"time"
)

// TestOpenEmbeddedNotBoundByConnectTimeout: ConnectTimeout is how long
// Open waits for a Redis that may not be up yet; the embedded server is
// listening once started, and Open's wait for it to answer and load the
// scripts — slow on a loaded machine (64 engines opening at once on 2 busy
// cores passed 5 s, and `wfc run` then failed with "cannot reach Redis") —
// is not bounded by it. A deadline too short for any machine stands for
// the load here.
func TestOpenEmbeddedNotBoundByConnectTimeout(t *testing.T) {
	e, err := Open(context.Background(), Options{ConnectTimeout: time.Nanosecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("embedded Open with a 1 ns ConnectTimeout: %v", err)
	}
	defer e.Close()
	if err := e.st.rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}
