// The TypeScript client's end-to-end test: run by server/tasksapi's Go
// test (TestTypeScriptClient) against a live server with a workflow whose
// handlers live here. Usage: node client_test.js URL TOKEN N (N: tasks).

import { TaskError, Worker } from "./wfc_worker";

async function main(): Promise<void> {
  const [url, token, n] = process.argv.slice(2);
  const w = new Worker({ url, token, name: "ts-test", waitMs: 1000 });
  w.handle("ts.greet", (task) => ({ greeting: `hello ${task.config.name}`, key: task.idempotency_key }));
  // Longer than the test's lease: heartbeats must keep it.
  w.handle("ts.slow", async (task) => {
    await new Promise((r) => setTimeout(r, task.lease_ms * 2.5));
    return { slept: true };
  });
  w.handle("ts.flaky", (task) => {
    if (task.attempt === 1) throw new TaskError("ts.busy", "first attempt fails", true);
    return { attempt: task.attempt };
  });
  w.handle("ts.deny", () => {
    throw new TaskError("ts.denied", "not allowed", false);
  });
  await w.run(Number(n));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
