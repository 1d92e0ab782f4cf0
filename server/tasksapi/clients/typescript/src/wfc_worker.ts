// A worker for wfc remote tasks: handlers written in TypeScript.
//
// Node's built-in fetch, no dependencies. Register a function per handler
// name, then run the loop: it long-polls POST /v1/tasks/poll for the tasks
// of those handlers, runs each while a heartbeat keeps its lease, and
// completes it with the function's result or fails it with the thrown
// TaskError (any other exception: code "error", retryable). See
// docs/handlers.md.
//
//   const w = new Worker({ url: "https://wfc.example:8080", token: process.env.WFC_TOKEN });
//   w.handle("crm.lookup", async (task) => {
//     if (!task.config.id) throw new TaskError("crm.bad_id", "no id", false);
//     return { name: "Ada" };
//   });
//   await w.run();
//
// A handler runs at least once per attempt: pass task.idempotency_key on
// to external systems to make their effects happen once.

import { hostname } from "node:os";

/** A typed handler failure: the node's retry policy and on_error routes read it. */
export class TaskError extends Error {
  constructor(
    public readonly code: string,
    message: string,
    public readonly retryable: boolean = true,
  ) {
    super(message);
    this.name = "TaskError";
  }
}

/** A problem+json answer of the server. */
export class APIError extends Error {
  constructor(
    public readonly status: number,
    public readonly code: string,
    public readonly detail: string,
  ) {
    super(`${status} ${code}: ${detail}`);
    this.name = "APIError";
  }
}

/** One handler call: the node's rendered config and where it runs. */
export interface Task {
  id: string;
  lease: string;
  lease_ms: number;
  /** The node's timeout, absent when none: the attempt fails that long after the poll. */
  timeout_ms?: number;
  handler: string;
  run_id: string;
  workflow: string;
  node: string;
  iteration?: string;
  item: number;
  attempt: number;
  config: any;
  idempotency_key: string;
  compensation?: boolean;
}

/** A handler gets the task and a signal aborted when the run ended or the lease was lost. */
export type Handler = (task: Task, signal: AbortSignal) => unknown | Promise<unknown>;

export interface WorkerOptions {
  url: string;
  token?: string;
  name?: string;
  /** How long a poll waits for a task (the server may cut it). */
  waitMs?: number;
}

const maxResponse = 16 << 20;

export class Worker {
  private readonly url: string;
  private readonly token?: string;
  readonly name: string;
  private readonly waitMs: number;
  private readonly handlers = new Map<string, Handler>();
  private stopped = false;
  private polling?: AbortController;

  constructor(opts: WorkerOptions) {
    this.url = opts.url.replace(/\/+$/, "");
    this.token = opts.token ?? process.env.WFC_TOKEN;
    this.name = (opts.name ?? `ts-${hostname()}-${process.pid}`).replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 128);
    this.waitMs = opts.waitMs ?? 20000;
  }

  /** Registers the handler of a name. */
  handle(name: string, fn: Handler): this {
    this.handlers.set(name, fn);
    return this;
  }

  /** Stops the loop after the task in hand (an idle poll is cancelled). */
  stop(): void {
    this.stopped = true;
    this.polling?.abort();
  }

  private async call(path: string, body: unknown, signal?: AbortSignal): Promise<any> {
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    const resp = await fetch(this.url + path, { method: "POST", headers, body: JSON.stringify(body), signal, redirect: "error" });
    const text = await readBounded(resp);
    if (!resp.ok) {
      let code = "http";
      let detail = resp.statusText;
      try {
        const p = JSON.parse(text);
        code = p.code ?? code;
        detail = p.detail ?? detail;
      } catch {
        // not a problem document
      }
      throw new APIError(resp.status, code, detail);
    }
    return resp.status === 204 || text === "" ? undefined : JSON.parse(text);
  }

  async poll(signal?: AbortSignal): Promise<Task | undefined> {
    return this.call("/v1/tasks/poll", { worker: this.name, handlers: [...this.handlers.keys()].sort(), wait_ms: this.waitMs }, signal);
  }

  async heartbeat(task: Task): Promise<void> {
    await this.call(`/v1/tasks/${encodeURIComponent(task.id)}/heartbeat`, { lease: task.lease });
  }

  async complete(task: Task, output: unknown): Promise<void> {
    await this.call(`/v1/tasks/${encodeURIComponent(task.id)}/complete`, { lease: task.lease, output: output ?? null });
  }

  async fail(task: Task, code: string, message: string, retryable: boolean): Promise<void> {
    await this.call(`/v1/tasks/${encodeURIComponent(task.id)}/fail`, { lease: task.lease, error: { code, message, retryable } });
  }

  /** Runs a task's handler with heartbeats, then completes or fails it. */
  async runOne(task: Task): Promise<void> {
    const lost = new AbortController();
    const beat = setInterval(() => {
      this.heartbeat(task).catch((e) => {
        if (e instanceof APIError && [404, 409, 410].includes(e.status)) lost.abort();
      });
    }, Math.max(task.lease_ms / 3, 50));
    let result: { ok: true; output: unknown } | { ok: false; err: TaskError };
    try {
      const fn = this.handlers.get(task.handler);
      if (!fn) throw new TaskError("no_handler", `no handler ${JSON.stringify(task.handler)} in this worker`, false);
      result = { ok: true, output: await fn(task, lost.signal) };
    } catch (e) {
      result = { ok: false, err: e instanceof TaskError ? e : new TaskError("error", String((e as Error)?.message ?? e), true) };
    } finally {
      clearInterval(beat);
    }
    try {
      if (result.ok) await this.complete(task, result.output);
      else await this.fail(task, result.err.code, result.err.message, result.err.retryable);
    } catch (e) {
      // Lost or ended: nothing to record.
      if (!(e instanceof APIError && (e.status === 409 || e.status === 410))) throw e;
    }
  }

  /** Polls and runs tasks until stop() (or maxTasks were handled). Network errors back off and retry. */
  async run(maxTasks?: number): Promise<number> {
    let handled = 0;
    let backoff = 100;
    while (!this.stopped && (maxTasks === undefined || handled < maxTasks)) {
      let task: Task | undefined;
      this.polling = new AbortController();
      try {
        task = await this.poll(this.polling.signal);
        backoff = 100;
      } catch (e) {
        if (this.stopped) break;
        if (e instanceof APIError && e.status >= 400 && e.status < 500 && e.status !== 429) throw e;
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
        continue;
      }
      if (!task) continue;
      await this.runOne(task);
      handled++;
    }
    return handled;
  }
}

// readBounded reads a response body of at most maxResponse bytes.
async function readBounded(resp: Response): Promise<string> {
  if (!resp.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of resp.body as any as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > maxResponse) throw new APIError(resp.status, "too-large", `response over ${maxResponse} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
