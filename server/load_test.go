package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLoad is the bounded loopback load test of docs/performance.md
// ("wfc serve"): with WFC_LOAD=1 it measures requests/s and p99 latency of
// a bare net/http handler doing one Redis round trip (PING over a pool of
// raw connections: the floor any endpoint sits on) and of the server's
// endpoints, in the same run, on a real redis-server.
func TestLoad(t *testing.T) {
	if os.Getenv("WFC_LOAD") == "" {
		t.Skip("set WFC_LOAD=1 to run the load test")
	}
	const conc, total = 16, 4000
	ts := startServer(t, backends[1])
	addr := strings.TrimSuffix(strings.TrimPrefix(ts.url, "redis://"), "/0")
	pool := make(chan *bufio.ReadWriter, conc)
	for i := 0; i < conc; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pool <- bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
	}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := <-pool
		defer func() { pool <- rw }()
		rw.WriteString("*1\r\n$4\r\nPING\r\n")
		rw.Flush()
		line, err := rw.ReadString('\n')
		if err != nil || line != "+PONG\r\n" {
			http.Error(w, "redis", 500)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer bare.Close()
	c := ts.client(t, "")
	var sub submitResponse
	c.do("POST", "/v1/runs", map[string]any{"source": readExample(t, "greet.wf"), "inputs": map[string]any{"name": "x"}}, nil).decode(t, &sub)
	c.waitRun(sub.RunID)
	src := readExample(t, "greet.wf")
	var dep workflowResponse
	c.do("POST", "/v1/workflows", map[string]any{"source": src, "tag": "g"}, nil).decode(t, &dep)

	type target struct {
		name, method, url, body string
	}
	targets := []target{
		{"bare net/http + 1 Redis round trip", "GET", bare.URL + "/", ""},
		{"GET /healthz", "GET", ts.http.URL + "/healthz", ""},
		{"GET /readyz", "GET", ts.http.URL + "/readyz", ""},
		{"GET /v1/runs/{run}", "GET", ts.http.URL + "/v1/runs/" + sub.RunID, ""},
		{"POST /v1/runs (by tag)", "POST", ts.http.URL + "/v1/runs", `{"workflow":"g","inputs":{"name":"y"}}`},
	}
	tr := &http.Transport{MaxIdleConnsPerHost: conc}
	hc := &http.Client{Transport: tr}
	var report strings.Builder
	fmt.Fprintf(&report, "| target | requests/s | p50 | p99 |\n|---|---:|---:|---:|\n")
	for _, tg := range targets {
		lat := make([]time.Duration, total)
		var wg sync.WaitGroup
		next := make(chan int, total)
		for i := 0; i < total; i++ {
			next <- i
		}
		close(next)
		start := time.Now()
		for w := 0; w < conc; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					t0 := time.Now()
					req, _ := http.NewRequest(tg.method, tg.url, strings.NewReader(tg.body))
					if tg.body != "" {
						req.Header.Set("Content-Type", "application/json")
					}
					res, err := hc.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode >= 300 {
						t.Errorf("%s: %d", tg.name, res.StatusCode)
						return
					}
					lat[i] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		slices.Sort(lat)
		fmt.Fprintf(&report, "| %s | %.0f | %.2f ms | %.2f ms |\n", tg.name, float64(total)/el.Seconds(),
			float64(lat[total/2].Microseconds())/1000, float64(lat[total*99/100].Microseconds())/1000)
	}
	t.Logf("%d requests per target, %d concurrent, loopback:\n%s", total, conc, report.String())
}
