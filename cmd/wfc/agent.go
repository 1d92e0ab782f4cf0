package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/runtime/agent"
)

// modelFlags are the flags of the commands whose workers run agent nodes
// (run, worker): where the model server is and how to reach it. The key
// comes from a file or the environment, never from a flag's value (which
// other users of the machine see in ps).
type modelFlags struct {
	baseURL, keyFile *string
	timeout          *time.Duration
	retries          *int
}

func addModelFlags(fs *flags, env *Env) modelFlags {
	return modelFlags{
		baseURL: fs.String("model-base-url", env.Getenv("OPENAI_BASE_URL"), "agent nodes' OpenAI-compatible API at `URL`, e.g. http://localhost:11434/v1 (default $OPENAI_BASE_URL, else https://api.openai.com/v1 when a key is given)"),
		keyFile: fs.String("model-api-key-file", "", "read the model API key from `FILE` (default $OPENAI_API_KEY)"),
		timeout: fs.Duration("model-timeout", agent.DefaultTimeout, "bound each model request to `DURATION` (an agent execution's whole conversation is bounded by its node's timeout, else 5m)"),
		retries: fs.Int("model-retries", agent.DefaultRetries, "send a model request `N` more times on 429, 5xx or a network error (0: never)"),
	}
}

// client returns the model client the flags and the environment
// configure, or nil when neither names a server nor a key (agent nodes
// then fail with agent.config, saying how to configure one).
func (m modelFlags) client(env *Env, log *slog.Logger) (*agent.Client, error) {
	key := strings.TrimSpace(env.Getenv("OPENAI_API_KEY"))
	if *m.keyFile != "" {
		data, err := os.ReadFile(*m.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--model-api-key-file: %w", err)
		}
		if key = strings.TrimSpace(string(data)); key == "" {
			return nil, fmt.Errorf("--model-api-key-file %s is empty", *m.keyFile)
		}
	}
	if *m.baseURL == "" && key == "" {
		return nil, nil
	}
	if *m.timeout <= 0 {
		return nil, errors.New("--model-timeout must be a positive duration")
	}
	retries := *m.retries
	if retries == 0 {
		retries = -1
	}
	return agent.New(agent.Config{BaseURL: *m.baseURL, APIKey: key, Timeout: *m.timeout, Retries: retries, Log: log})
}

const fakemodelDoc = `
Fakemodel serves an OpenAI-compatible chat completions API that plays the
model with canned answers, so that agent nodes can be tried without a key
or a model: point a worker at it with --model-base-url http://ADDR/v1.

Without --answers, a routing agent gets its first allowed route and any
other agent an echo of its prompt. --answers FILE is a JSON list of answers,
the first that matches a request is given (docs/agents.md, "The fake
model"):

  [{"match": "Acme", "routes": ["enterprise_sales"], "reasoning": "big"},
   {"turn": 1, "tool_calls": [{"name": "search_tools", "arguments": {}}]},
   {"status": 429, "retry_after": "2", "times": 1},
   {"text": "a plain answer"}]`

func runFakemodel(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("fakemodel", "wfc fakemodel [--listen ADDR] [--answers FILE]", fakemodelDoc)
	listen := fs.String("listen", "127.0.0.1:8089", "serve on `ADDR`")
	answers := fs.String("answers", "", "canned answers: a JSON list in `FILE`")
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	if len(args) > 0 {
		return fs.usageError(env, "fakemodel takes no arguments")
	}
	f := &agent.Fake{}
	if *answers != "" {
		data, err := os.ReadFile(*answers)
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc fakemodel: %v\n", err)
			return exitFailed
		}
		if f.Answers, err = agent.LoadFakeAnswers(data); err != nil {
			fmt.Fprintf(env.Stderr, "wfc fakemodel: %s: %v\n", *answers, err)
			return exitFailed
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc fakemodel: %v\n", err)
		return exitFailed
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	fmt.Fprintf(env.Stderr, "wfc fakemodel: serving http://%s/v1 (%d canned answers)\n", ln.Addr(), len(f.Answers))
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(env.Stderr, "wfc fakemodel: %v\n", err)
		return exitFailed
	}
	return exitOK
}
