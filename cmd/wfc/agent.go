package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/livepatch"
	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/agent"
	"github.com/wfc-lang/wfc/runtime/agent/tools"
)

// modelFlags are the flags of the commands whose workers run agent nodes
// (run, worker): where the model server is and how to reach it. The key
// comes from a file or the environment, never from a flag's value (which
// other users of the machine see in ps).
type modelFlags struct {
	baseURL, keyFile *string
	timeout          *time.Duration
	retries          *int
	// The agent tools' allow-lists (docs/agent-tools.md).
	httpAllow, openapi, openapiHeader, delegateAllow *commaList
}

func addModelFlags(fs *flags, env *Env) *modelFlags {
	m := &modelFlags{
		baseURL: fs.String("model-base-url", env.Getenv("OPENAI_BASE_URL"), "agent nodes' OpenAI-compatible API at `URL`, e.g. http://localhost:11434/v1 (default $OPENAI_BASE_URL, else https://api.openai.com/v1 when a key is given)"),
		keyFile: fs.String("model-api-key-file", "", "read the model API key from `FILE` (default $OPENAI_API_KEY)"),
		timeout: fs.Duration("model-timeout", agent.DefaultTimeout, "bound each model request to `DURATION` (an agent execution's whole conversation is bounded by its node's timeout, else 5m)"),
		retries: fs.Int("model-retries", agent.DefaultRetries, "send a model request `N` more times on 429, 5xx or a network error (0: never)"),
	}
	m.httpAllow = newCommaList(env.Getenv("WFC_AGENT_HTTP_ALLOW"))
	m.openapi, m.openapiHeader, m.delegateAllow = newCommaList(""), newCommaList(""), newCommaList("")
	fs.Var(m.httpAllow, "agent-http-allow", "agent tools (http_request, openapi_action) may connect to `HOSTS` (names, addresses, CIDR ranges, :port; \"*\": any public host; default $WFC_AGENT_HTTP_ALLOW, else none); repeatable")
	fs.Var(m.openapi, "agent-openapi", "openapi_action may call the operations of the OpenAPI document in `FILE`; repeatable")
	fs.Var(m.openapiHeader, "agent-openapi-header", "add header NAME, valued by environment variable ENV, to every request to FILE's API: `FILE:NAME=ENV`; repeatable")
	fs.Var(m.delegateAllow, "agent-delegate-allow", "delegate_to_agent may start only these deployed tags: `workflow:NAME` or `agent:NAME`, repeatable (default: any)")
	return m
}

// toolset returns the worker's agent tools as the flags configure them.
func (m *modelFlags) toolset(env *Env) (*tools.Worker, error) {
	cfg := tools.Config{HTTPAllow: m.httpAllow.vals, OpenAPI: m.openapi.vals, DelegateAllow: m.delegateAllow.vals}
	for _, h := range m.openapiHeader.vals {
		file, rest, ok1 := strings.Cut(h, ":")
		name, envName, ok2 := strings.Cut(rest, "=")
		if !ok1 || !ok2 || file == "" || name == "" || envName == "" {
			return nil, fmt.Errorf("--agent-openapi-header: %q is not FILE:NAME=ENV", h)
		}
		v := env.Getenv(envName)
		if v == "" {
			return nil, fmt.Errorf("--agent-openapi-header %s: environment variable %s is empty", h, envName)
		}
		if cfg.OpenAPIHeaders == nil {
			cfg.OpenAPIHeaders = map[string]map[string]string{}
		}
		if cfg.OpenAPIHeaders[file] == nil {
			cfg.OpenAPIHeaders[file] = map[string]string{}
		}
		cfg.OpenAPIHeaders[file][name] = v
	}
	return tools.NewWorker(cfg)
}

// agentPatch is patch_workflow's lane: the live-patch applier restricted
// to additions downstream of the agent.
func agentPatch(eng *runtime.Engine) runtime.AgentPatchFunc {
	return func(ctx context.Context, run, node string, patch []byte, by string) (json.RawMessage, error) {
		res, err := livepatch.Downstream(ctx, eng, run, node, patch, by)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	}
}

// client returns the model client the flags and the environment
// configure, or nil when neither names a server nor a key (agent nodes
// then fail with agent.config, saying how to configure one).
func (m *modelFlags) client(env *Env, log *slog.Logger) (*agent.Client, error) {
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
