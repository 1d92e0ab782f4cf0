"""A worker for wfc remote tasks: handlers written in Python.

Standard library only (Python 3.9+). Register a function per handler
name, then run the loop: it long-polls ``POST /v1/tasks/poll`` for the
tasks of those handlers, runs each in a thread while a heartbeat keeps its
lease, and completes it with the function's return value or fails it with
the exception's typed error. See docs/handlers.md.

    from wfc_worker import Worker, TaskError

    w = Worker("https://wfc.example:8080", token=os.environ["WFC_TOKEN"])

    @w.handler("crm.lookup")
    def lookup(task):
        if not task.config.get("id"):
            raise TaskError("crm.bad_id", "no id", retryable=False)
        return {"name": "Ada"}

    w.run()

A handler runs at least once per attempt: pass ``task.idempotency_key``
on to external systems to make their effects happen once.
"""

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Worker", "Task", "TaskError", "APIError"]

_MAX_RESPONSE = 16 << 20  # bytes of a response read


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: the token goes to the server's URL only (a 3xx
    becomes an HTTPError)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


class TaskError(Exception):
    """A typed handler failure: code ([A-Za-z0-9._-]+), message, and
    whether another attempt may help (the node's retry policy decides)."""

    def __init__(self, code, message, retryable=True):
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable


class APIError(Exception):
    """A problem+json answer of the server (status, code, detail)."""

    def __init__(self, status, code, detail):
        super().__init__("%d %s: %s" % (status, code, detail))
        self.status = status
        self.code = code
        self.detail = detail


class Task:
    """One handler call: the node's rendered config and where it runs."""

    def __init__(self, d):
        self.id = d["id"]
        self.lease = d["lease"]
        self.lease_ms = int(d["lease_ms"])
        # The node's timeout (0: none): the attempt fails that long after
        # the poll, so a handler should give up by then.
        self.timeout_ms = int(d.get("timeout_ms", 0))
        self.handler = d["handler"]
        self.run_id = d["run_id"]
        self.workflow = d.get("workflow", "")
        self.node = d["node"]
        self.iteration = d.get("iteration", "")
        self.item = d.get("item", -1)
        self.attempt = d["attempt"]
        self.config = d.get("config")
        self.idempotency_key = d["idempotency_key"]
        self.compensation = d.get("compensation", False)
        # Set when the run ended or the lease was lost: the handler may
        # stop early; its result would change nothing.
        self.cancelled = threading.Event()


class Worker:
    def __init__(self, url, token=None, name=None, wait_ms=20000, timeout=None):
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("WFC_TOKEN")
        self.name = name or ("py-%s-%d" % (socket.gethostname(), os.getpid()))
        self.name = "".join(c if c.isalnum() or c in "._-" else "-" for c in self.name)[:128]
        self.wait_ms = wait_ms
        # A request's timeout: a poll's wait plus slack.
        self.timeout = timeout or wait_ms / 1000 + 30
        self.handlers = {}
        self._stop = threading.Event()

    def handler(self, name):
        """Decorator: registers fn(task) -> JSON-serialisable output."""

        def register(fn):
            self.handlers[name] = fn
            return fn

        return register

    def stop(self):
        self._stop.set()

    # --- the protocol -------------------------------------------------

    def _call(self, path, body):
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST")
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with _opener.open(req, timeout=self.timeout) as resp:
                raw = resp.read(_MAX_RESPONSE + 1)
                if resp.status == 204 or not raw:
                    return None
                if len(raw) > _MAX_RESPONSE:
                    raise APIError(resp.status, "too-large", "response over %d bytes" % _MAX_RESPONSE)
                return json.loads(raw)
        except urllib.error.HTTPError as e:
            code, detail = "http", e.reason
            try:
                p = json.loads(e.read(65536))
                code, detail = p.get("code", code), p.get("detail", detail)
            except Exception:
                pass
            raise APIError(e.code, code, detail) from None

    def poll(self):
        d = self._call("/v1/tasks/poll", {"worker": self.name, "handlers": sorted(self.handlers), "wait_ms": self.wait_ms})
        return Task(d) if d else None

    def heartbeat(self, task):
        return self._call("/v1/tasks/%s/heartbeat" % urllib.parse.quote(task.id, safe=""), {"lease": task.lease})

    def complete(self, task, output):
        self._call("/v1/tasks/%s/complete" % urllib.parse.quote(task.id, safe=""), {"lease": task.lease, "output": output})

    def fail(self, task, code, message, retryable):
        self._call(
            "/v1/tasks/%s/fail" % urllib.parse.quote(task.id, safe=""),
            {"lease": task.lease, "error": {"code": code, "message": message, "retryable": retryable}},
        )

    # --- the loop -----------------------------------------------------

    def run_one(self, task):
        """Runs a task's handler with heartbeats, then completes or fails it."""
        done = threading.Event()

        def beat():
            every = max(task.lease_ms / 3000.0, 0.05)
            while not done.wait(every):
                try:
                    self.heartbeat(task)
                except APIError as e:
                    if e.status in (409, 410, 404):
                        task.cancelled.set()
                        return
                except OSError:
                    pass  # the next beat may get through; the lease decides

        t = threading.Thread(target=beat, daemon=True)
        t.start()
        try:
            fn = self.handlers.get(task.handler)
            if fn is None:
                result = TaskError("no_handler", "no handler %r in this worker" % task.handler, False)
            else:
                try:
                    result = fn(task)
                except TaskError as e:
                    result = e
                except Exception as e:  # an untyped failure: retryable, code "error"
                    result = TaskError("error", "%s: %s" % (type(e).__name__, e), True)
        finally:
            done.set()
            t.join()
        try:
            if isinstance(result, TaskError):
                self.fail(task, result.code, result.message, result.retryable)
            else:
                self.complete(task, result)
        except APIError as e:
            if e.status not in (409, 410):  # lost or ended: nothing to record
                raise

    def run(self, max_tasks=None):
        """Polls and runs tasks until stop() (or max_tasks were handled).
        Network errors back off and retry."""
        handled, backoff = 0, 0.1
        while not self._stop.is_set() and (max_tasks is None or handled < max_tasks):
            try:
                task = self.poll()
                backoff = 0.1
            except (OSError, APIError) as e:
                if isinstance(e, APIError) and 400 <= e.status < 500 and e.status != 429:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, 5)
                continue
            if task is None:
                continue
            self.run_one(task)
            handled += 1
        return handled
