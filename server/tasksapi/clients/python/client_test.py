"""The Python client's end-to-end test: run by server/tasksapi's Go test
(TestPythonClient) against a live server with a workflow whose handlers
live here. Usage: python3 client_test.py URL TOKEN N (N: tasks to handle).
"""

import sys
import time

from wfc_worker import TaskError, Worker


def main():
    url, token, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    w = Worker(url, token=token, name="py-test", wait_ms=1000)

    @w.handler("py.greet")
    def greet(task):
        return {"greeting": "hello " + task.config["name"], "key": task.idempotency_key}

    @w.handler("py.slow")
    def slow(task):
        # Longer than the test's lease: heartbeats must keep it.
        time.sleep(task.lease_ms * 2.5 / 1000)
        return {"slept": True}

    @w.handler("py.flaky")
    def flaky(task):
        if task.attempt == 1:
            raise TaskError("py.busy", "first attempt fails", retryable=True)
        return {"attempt": task.attempt}

    @w.handler("py.deny")
    def deny(task):
        raise TaskError("py.denied", "not allowed", retryable=False)

    w.run(max_tasks=n)


if __name__ == "__main__":
    main()
