#!/usr/bin/env python3
"""Report task runs to Apollo-11 from Python, with the standard library only.

It follows docs/protocol.md and nothing more: events are JSON objects POSTed
to /api/v1/events, numbered 1, 2, 3... per task; the server answers each one
accepted, held, waiting, duplicate, rejected or retry_later. Resending is always safe,
so anything that did not get a final answer is sent again, with backoff.

As a library (copy this file next to your job, or put it on PYTHONPATH):

    from apollo_report import Reporter

    reporter = Reporter("http://127.0.0.1:1969", token=os.environ.get("APOLLO_TOKEN"))
    with reporter.run("nightly_backup", timeout=3600):
        backup()            # an exception reports the run failed, then propagates

    run = reporter.task("etl@2026-11-29", name="etl")
    run.pending(scheduled_at=due)
    run.running(timeout=1800)
    run.success(extra={"rows": 1200})

From a shell:

    python3 apollo_report.py --server http://127.0.0.1:1969 \\
        --task backup-20261129 --name nightly_backup --status running

Exit codes of the command line: 0 stored (or the server already had it),
1 not delivered (server unreachable or failing for --give-up-after seconds),
2 rejected by the server or a mistake in the arguments.
"""

import argparse
import atexit
import datetime
import json
import logging
import os
import random
import re
import sys
import time
import urllib.error
import urllib.request
import http.client

__all__ = ["Reporter", "Run", "ReportError", "STATUSES"]

STATUSES = ("pending", "running", "success", "failed", "timeout", "manual_blocked")

# Answers that need nothing more from the reporter (docs/protocol.md, "The answer").
_FINAL = ("accepted", "held", "waiting", "duplicate", "rejected")

log = logging.getLogger("apollo_report")


class ReportError(Exception):
    """Events could not be delivered, or the server refused the request.

    status is the HTTP status (0 when the server was not reached), error the
    server's error object when it sent one, and results the per-event answers
    gathered before giving up (None for events that never got one).
    """

    def __init__(self, message, status=0, error=None, results=None, refused=False):
        super().__init__(message)
        self.status = status
        self.error = error
        self.results = results or []
        self.refused = refused  # True: resending the same request cannot help


def _ms(seconds):
    return int(round(seconds * 1000))


def _unix_ms(t):
    """A datetime, or Unix seconds, as Unix milliseconds."""
    if isinstance(t, datetime.datetime):
        return _ms(t.timestamp())
    return _ms(float(t))


def _retry_after(value):
    """Seconds from a Retry-After header; the server sends whole seconds."""
    try:
        return max(0.0, min(float(value), 300.0))
    except (TypeError, ValueError):
        return 0.0


def _shown(value, limit=120):
    """value as a log line shows it: as JSON, so that a control character
    in it (an escape sequence that would drive the terminal showing the
    log) is escaped, and cut to limit characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        text = "%s... (%d characters)" % (text[:limit], len(text))
    return text


def _describe(error):
    if not isinstance(error, dict):
        return str(error)
    text = error.get("message", "")
    if error.get("field"):
        text = "%s: %s" % (error["field"], text)
    if error.get("hint"):
        text += " (%s)" % error["hint"]
    return text


class Reporter:
    """Sends events to one Apollo-11 server.

    server         base URL, e.g. http://127.0.0.1:1969
    token          sent as "Authorization: Bearer <token>" when set
    batch          queue events and send them batch_size at a time, when an
                   event is reported after the oldest waited flush_interval
                   seconds, and on flush() and close(); otherwise every event
                   is sent as it is reported
    give_up_after  seconds to keep retrying one request before ReportError
    max_queue      events a batching reporter keeps while the server is away;
                   past it the oldest are dropped, with an error in the log
    strict         raise ReportError from the Run methods; by default they log
                   it and return None, so that monitoring never breaks a job
    """

    def __init__(self, server="http://127.0.0.1:1969", token=None, batch=False, batch_size=100,
                 flush_interval=1.0, request_timeout=10.0, give_up_after=60.0, strict=False,
                 max_queue=10000, sleep=time.sleep):
        self.endpoint = server.rstrip("/") + "/api/v1/events"
        self.token = token
        # What makes every request impossible, said once per send instead of
        # a ValueError from urllib that would break the job (and print the
        # token in its traceback).
        self._unusable = None
        if not re.match(r"https?://", server):
            self._unusable = "--server %r: write the server's URL with http:// or https://" % server
        elif token and any(ord(ch) < 0x20 or ord(ch) >= 0x7f for ch in token):
            self._unusable = ("the token holds a control character or a non-ASCII character, which no HTTP header can"
                              " carry; a line end read with it from a file? remove it")
        self.batch = batch
        self.batch_size = max(1, int(batch_size))
        self.flush_interval = flush_interval
        self.request_timeout = request_timeout
        self.give_up_after = give_up_after
        self.strict = strict
        self.max_queue = max_queue
        self._sleep = sleep
        self._queue = []
        self._queued_at = 0.0
        self._not_before = 0.0  # a slowDown answer asks the next request to wait
        self.stats = {"accepted": 0, "held": 0, "waiting": 0, "duplicate": 0, "rejected": 0, "retries": 0, "dropped": 0}
        if batch:
            atexit.register(self.close)  # a script that forgets close() still sends its last events

    # --- reporting -------------------------------------------------------

    def task(self, task_id, name=None):
        """A Run for task_id whose events are numbered 1, 2, 3..."""
        return Run(self, task_id, name)

    def run(self, name, task_id=None, timeout=None, scheduled_at=None, extra=None):
        """A context manager that reports the block as one run of job name.

        It reports running on entry, then success, or failed with the
        exception when the block raises (the exception propagates). The task
        ID defaults to NAME@py-<unix ms>-<pid>.
        """
        if task_id is None:
            task_id = "%s@py-%d-%d" % (name, _ms(time.time()), os.getpid())
        return Run(self, task_id, name, start={"timeout": timeout, "scheduled_at": scheduled_at, "extra": extra})

    def report(self, event):
        """Sends one event (or queues it when batching). Returns its answer,
        e.g. {"result": "accepted"}, or None when queued or not delivered."""
        if self.batch:
            if not self._queue:
                self._queued_at = time.monotonic()
            self._queue.append(event)
            if len(self._queue) > self.max_queue:
                del self._queue[0]
                self.stats["dropped"] += 1
                log.error("queue full (%d events): dropped the oldest event", self.max_queue)
            if len(self._queue) >= self.batch_size or time.monotonic() - self._queued_at >= self.flush_interval:
                self._guarded(self.flush)
            return None
        results = self._guarded(self.send, [event])
        return results[0] if results else None

    def flush(self):
        """Sends every queued event; returns their answers in order."""
        results = []
        while self._queue:
            chunk, self._queue = self._queue[:self.batch_size], self._queue[self.batch_size:]
            try:
                results.extend(self.send(chunk))
            except ReportError:
                self._queue = chunk + self._queue  # kept for the next flush
                raise
        return results

    def close(self):
        """Flushes what is queued. Errors are logged unless strict."""
        self._guarded(self.flush)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _guarded(self, fn, *args):
        try:
            return fn(*args)
        except ReportError as e:
            if self.strict:
                raise
            log.error("not reported: %s", e)
            return None

    # --- the protocol ----------------------------------------------------

    def send(self, events):
        """POSTs events and resends those that got no final answer, until
        each has one; a request answered 413 is split in halves. Returns one
        answer per event, in order. Raises ReportError when the request is
        refused as a whole or the server cannot be reached for
        give_up_after seconds."""
        if self._unusable:
            raise ReportError(self._unusable, refused=True)
        results = [None] * len(events)
        waiting = list(range(len(events)))
        deadline = time.monotonic() + self.give_up_after
        attempt = 0
        limit = len(events)  # events per request; halved on 413
        while waiting:
            part = waiting[:limit]
            status, headers, answer, problem = self._post([events[i] for i in part])
            pause = _retry_after(headers.get("Retry-After")) if headers else 0.0
            per_event = isinstance(answer, dict) and isinstance(answer.get("results"), list) \
                and len(answer["results"]) == len(part)
            if status in (200, 429) and per_event:
                again = self._take(events, part, answer["results"], results)
                # Resent events go first: a task's events stay in order.
                waiting = again + waiting[len(part):]
                if answer.get("slowDown"):
                    self._not_before = time.monotonic() + max(pause, 1.0)
                if not again:
                    attempt, deadline = 0, time.monotonic() + self.give_up_after
                    continue
                problem = "%d event(s) answered retry_later" % len(again)
                why = answer["results"][part.index(again[0])]
                if isinstance(why, dict) and isinstance(why.get("error"), dict):
                    problem += ": " + why["error"].get("message", "")
            elif status == 413 and len(part) > 1:
                # Over the body limit, or more events than the token's rate
                # per second: the same events fit in smaller requests.
                limit = max(1, len(part) // 2)
                continue
            elif 400 <= status < 500 and status not in (408, 429):
                error = answer.get("error") if isinstance(answer, dict) else None
                raise ReportError("the server refused the request: %s" % problem, status, error, results, refused=True)
            elif 200 <= status < 300:
                problem = "HTTP %d without one result per event" % status  # not Apollo-11 answering? resend
            # Exponential backoff with full jitter, and never sooner than the
            # server asked.
            wait = max(pause, random.uniform(0, min(30.0, 0.25 * 2 ** min(attempt, 10))))
            if time.monotonic() + wait > deadline:
                raise ReportError("gave up after %.0fs: %s" % (self.give_up_after, problem), status, None, results)
            attempt += 1
            self.stats["retries"] += 1
            log.warning("%s; retrying in %.1fs", problem, wait)
            self._sleep(wait)
        return results

    def _take(self, events, waiting, answers, results):
        """Records final answers; returns the indexes to send again."""
        again = []
        for i, answer in zip(waiting, answers):
            kind = answer.get("result") if isinstance(answer, dict) else None
            if kind not in _FINAL:  # retry_later, or a word this script does not know
                again.append(i)
                continue
            results[i] = answer
            self.stats[kind] += 1
            if kind == "rejected":
                ev = events[i]
                log.warning("rejected, not resent: task %s sequence %s status %s: %s", _shown(ev.get("taskID")),
                            _shown(ev.get("sequence")), _shown(ev.get("status")), _describe(answer.get("error")))
        return again

    def _post(self, events):
        """One request. Returns (status, headers, decoded body, problem);
        status 0 means the server was not reached."""
        delay = self._not_before - time.monotonic()
        if delay > 0:
            self._sleep(delay)
        body = json.dumps(events, separators=(",", ":")).encode("utf-8")
        req = urllib.request.Request(self.endpoint, data=body, method="POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("User-Agent", "apollo-report-python/1")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.request_timeout) as resp:
                status, headers, raw = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:  # any status other than 2xx
            status, headers, raw = e.code, e.headers, e.read()
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            reason = getattr(e, "reason", e)
            return 0, None, None, "server unreachable (%s)" % reason
        try:
            answer = json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            answer = None
        problem = "HTTP %d" % status
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            problem += ": " + _describe(answer["error"])
        return status, headers, answer, problem


class Run:
    """One run (task) of a job. Each method reports one event with the next
    sequence number and returns the server's answer (None when queued or not
    delivered). Durations are in seconds; scheduled_at is a datetime or Unix
    seconds."""

    def __init__(self, reporter, task_id, name=None, start=None):
        self.reporter = reporter
        self.task_id = task_id
        self.name = name
        self.sequence = 0
        self.status = None
        self._start = start  # set by Reporter.run: what __enter__ reports

    def event(self, status, timeout=None, scheduled_at=None, cost=None, extra=None):
        """Reports status (one of STATUSES) as the next event of this run."""
        if status not in STATUSES:
            raise ValueError("status %r: use one of %s" % (status, ", ".join(STATUSES)))
        self.sequence += 1
        ev = {"taskID": self.task_id, "sequence": self.sequence, "status": status, "ts": _ms(time.time())}
        if self.name:
            ev["name"] = self.name
        if scheduled_at is not None:
            ev["scheduledAt"] = _unix_ms(scheduled_at)
        if timeout:
            ev["timeoutMs"] = _ms(timeout)
        if cost is not None:
            ev["costMs"] = _ms(cost)
        if extra:
            ev["extra"] = extra
        self.status = status
        return self.reporter.report(ev)

    def pending(self, scheduled_at=None, timeout=None, extra=None):
        return self.event("pending", timeout=timeout, scheduled_at=scheduled_at, extra=extra)

    def running(self, timeout=None, scheduled_at=None, extra=None):
        return self.event("running", timeout=timeout, scheduled_at=scheduled_at, extra=extra)

    def success(self, cost=None, extra=None):
        return self.event("success", cost=cost, extra=extra)

    def failed(self, cost=None, extra=None):
        return self.event("failed", cost=cost, extra=extra)

    def timed_out(self, extra=None):
        return self.event("timeout", extra=extra)

    def blocked(self, extra=None):
        return self.event("manual_blocked", extra=extra)

    def __enter__(self):
        start = self._start or {}
        if self.status is None:
            self.running(timeout=start.get("timeout"), scheduled_at=start.get("scheduled_at"), extra=start.get("extra"))
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.status in ("success", "failed", "timeout"):
            return False  # the block reported the end itself
        clean = exc_type is None or (exc_type is SystemExit and exc.code in (None, 0))
        if clean:
            self.success()
        else:
            self.failed(extra={"error": ("%s: %s" % (exc_type.__name__, exc))[:1000]})
        return False


# --- command line ---------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def _seconds(text):
    """"90", "90s", "1h30m", "250ms" as seconds."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError("%r is not a duration (e.g. 90s, 30m, 1h30m)" % text)
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _timestamp(text):
    """RFC 3339 (2026-11-29T02:00:00Z) as Unix seconds."""
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not RFC 3339 (e.g. 2026-11-29T02:00:00Z)" % text)


def _pair(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError("%r: write key=value" % text)
    return key, value


# The default sequence of each step: its place in a run (as `apollo report`).
_STEP = {"pending": 1, "running": 2, "manual_blocked": 3, "success": 4, "failed": 4, "timeout": 4}


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="apollo_report.py",
        description="Report one lifecycle event of a run to Apollo-11 (docs/protocol.md).",
        epilog="Exit codes: 0 stored or already there; 1 not delivered; 2 rejected, or bad arguments.")
    p.add_argument("--server", default=os.environ.get("APOLLO_SERVER", "http://127.0.0.1:1969"),
                   help="server URL (default $APOLLO_SERVER, else http://127.0.0.1:1969)")
    p.add_argument("--token", default=os.environ.get("APOLLO_TOKEN"), help="API token (default $APOLLO_TOKEN)")
    p.add_argument("--task", required=True, help="the run's task ID")
    p.add_argument("--name", help="the job name (default: the task ID)")
    p.add_argument("--status", required=True, choices=STATUSES)
    p.add_argument("--seq", type=int, default=None,
                   help="sequence number (default: the step's place in a run: pending 1, running 2, "
                        "manual_blocked 3, the end 4)")
    p.add_argument("--scheduled-at", type=_timestamp, help="when the run was due, RFC 3339")
    p.add_argument("--timeout", type=_seconds, help="deadline of the running run, e.g. 30m")
    p.add_argument("--cost", type=_seconds, help="the run's duration, e.g. 95s")
    p.add_argument("--extra", type=_pair, action="append", default=[], metavar="KEY=VALUE",
                   help="kept with the event (repeatable)")
    p.add_argument("--give-up-after", type=_seconds, default=60.0,
                   help="keep retrying this long when the server is unreachable (default 60s)")
    args = p.parse_args(argv)
    logging.basicConfig(format="apollo_report: %(message)s", level=logging.INFO, stream=sys.stderr)

    reporter = Reporter(args.server, token=args.token, give_up_after=args.give_up_after, strict=True)
    run = reporter.task(args.task, args.name)
    # The sequence is per task and must grow from one call to the next. By
    # default it is the step's place in a run, as `apollo report` numbers
    # it: a run's steps reported in order need no counter kept anywhere, a
    # step reported twice is a duplicate, and a run reported only by its end
    # is a finished run with an unknown start. A --seq given is sent as
    # given: 0 is the server's to refuse, not a "no --seq".
    run.sequence = (_STEP[args.status] if args.seq is None else args.seq) - 1
    try:
        answer = run.event(args.status, timeout=args.timeout, scheduled_at=args.scheduled_at, cost=args.cost,
                           extra=dict(args.extra))
    except ReportError as e:
        print("apollo_report: %s" % e, file=sys.stderr)
        return 2 if e.refused else 1
    result = answer.get("result")
    if result == "rejected":
        print("apollo_report: rejected by the server: %s" % _describe(answer.get("error")), file=sys.stderr)
        return 2
    print({"duplicate": "duplicate (the server already had it)",
           "waiting": "waiting (stored; an earlier event of this run has not arrived: it applies when that does,"
                      " or when the reorder window ends)"}.get(result, "accepted"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
