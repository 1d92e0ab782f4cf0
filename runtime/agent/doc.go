// Package agent is the model side of agent nodes (docs/agents.md): a client
// for OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp's
// server), the defensive reading of a model's routing decision, and the
// tool-calling conversation loop with its limits.
//
// The package knows nothing of runs or Redis: the runtime renders the
// prompt, records the decision once per execution and routes on it. The API
// key comes from the worker's configuration or the environment, never from
// a workflow; it is sent in the Authorization header only, and masked out of
// every error this package returns.
package agent
