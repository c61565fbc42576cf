"""A list/watch reflector on webhook.kube.rest's connections, reading raw JSON (no model classes).

client-go's Reflector, reduced to what the project needs: LIST, hand the items and the list's
resourceVersion to the store, then WATCH from that version with bookmarks and apply each event.

- The LIST is a consistent read (`resourceVersion=""`) unless `list_from_watch_cache` is set: then, as
  client-go's reflector (and so the kubelet) does, the first LIST asks for `resourceVersion="0"` and a
  re-LIST for the last version seen ("not older than"), both served from the API server's watch cache
  instead of a quorum read that makes etcd scan the whole collection; a LIST the cache cannot serve
  (410, or a version the cache has not reached) falls back to one consistent read. A DaemonSet's agents
  (one LIST of their node's pods each, on every start and relist) set it; the PriorityClass cache, a
  small list read by few replicas where a just-created class must be seen at once, does not.

- The server closing the watch (its `timeoutSeconds`, randomised between `timeout_seconds` and twice
  that, as client-go's 5-10 minutes) just re-watches from the last resourceVersion, at once: a watch that
  ran normally resets the retry delay, however few events it carried.
- `410 Gone` (HTTP 410 or an ERROR event with code 410: the version was compacted away) re-LISTs and
  replaces the store in one step, so no deleted object lingers and none is missed.
- Anything else (connection refused or dropped, read timeout, 5xx, an ERROR event, bad JSON) retries the
  same step after a jittered exponential backoff, capped at `backoff_max`; while the API server is down
  (no answer, or a 5xx) the cap is `reconnect_max` (1 s): the cache may be missing a change made while
  it was down, and a retry then costs the server nothing it cannot refuse, so the window in which a
  deleted class is still used after the API server answers again is at most about a second, not a
  30-second backoff (429 and other refusals keep the full backoff).
- A client-side read timeout bounds how long a silent, half-open connection can hold the cache: on a
  watch it is the watch's own `timeoutSeconds` plus `read_timeout`, so it never cuts a healthy watch, even
  on a quiet cluster whose API server sends no bookmark; a watch it cuts is re-opened at once (the
  connection broke, the server may be fine). LIST waits `read_timeout` for each read.

A `transform` (client-go's TransformFunc) is applied to every object before the store sees it: a cache
keeps only the fields its readers use (the sidecar's pods without managedFields, environment and probes),
so the memory a cache holds follows what the project reads, not what users write.

Authentication comes with the connection (webhook.kube.rest: the service account's token, or the client's
Configuration for a kubeconfig); only paths and error summaries are ever logged.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from webhook import json_codec
from webhook.kube import metrics, rest

log = logging.getLogger(__name__)


class ObjectStore(Protocol):
    """What a reflector feeds."""

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        """Swap the whole content for a LIST result, atomically."""
        ...

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        """Apply one watch event: "ADDED" | "MODIFIED" | "DELETED"."""
        ...


Transform = Callable[[dict[str, Any]], dict[str, Any]]


class _Gone(Exception):
    """The watched resourceVersion is too old: re-LIST."""

    def __str__(self) -> str:
        return "410 Gone: resourceVersion too old"


class _Stopped(Exception):
    """stop() was called."""


class Reflector:
    """Keeps an ObjectStore in step with one API collection, on a background daemon thread."""

    def __init__(
        self,
        api_client: rest.Client,
        path: str,
        store: ObjectStore,
        *,
        name: str,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        reconnect_max: float = 1.0,
        read_timeout: float = 75.0,
        connect_timeout: float = 10.0,
        list_from_watch_cache: bool = False,
        transform: Transform | None = None,
    ) -> None:
        self.path = path
        self.name = name
        self.store = store
        self.timeout_seconds = timeout_seconds
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.reconnect_max = reconnect_max
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.list_from_watch_cache = list_from_watch_cache
        self.transform = transform
        self.resource_version = ""
        self._list_consistent = False  # the watch cache could not serve the last LIST: read through once
        self.last_activity = 0.0  # time.monotonic() of the last successful list/watch activity
        # The last LIST or WATCH failure, None once a request succeeded again: what a reader that cannot
        # wait (webhook.kube.namespace_store) reports instead of the answer it lacks.
        self.failure: Exception | None = None
        self._client = api_client
        self._selectors = {
            k: v for k, v in (("fieldSelector", field_selector), ("labelSelector", label_selector)) if v
        }
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: rest.Stream | None = None
        self._failures = 0
        self._events_since_list = 0

    # -- public ---------------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        """True once the first LIST has landed in the store (and forever after)."""
        return self._synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def start(self) -> None:
        if self._thread is not None:
            return
        metrics.SYNCED.labels(self.name).set(0)
        for failures in (metrics.RELISTS, metrics.RECONNECTS):  # exported at 0 from the start
            failures.labels(self.name)
        self._failing(None)
        self._thread = threading.Thread(target=self._run, name=f"reflector-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the loop; an open watch is shut down so the thread does not wait out its read timeout."""
        self._stopping.set()
        response = self._response
        if response is not None:
            _shutdown(response)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the loop -------------------------------------------------------------------------------------
    def _run(self) -> None:
        need_list = True
        while not self._stopping.is_set():
            fresh = need_list
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
            except _Stopped:
                return
            except _Gone as err:
                metrics.RELISTS.labels(self.name).inc()
                need_list = True
                if fresh and not self._events_since_list:
                    # Gone right after a LIST: relisting at once would loop hot against a broken server.
                    self._retry(err, "WATCH")
                else:
                    log.info("%s: resourceVersion %s expired, re-listing", self.name, self.resource_version)
            except Exception as err:  # any failure must end in a retry, never in a dead thread
                self._retry(err, "LIST" if need_list else "WATCH")

    def _retry(self, err: Exception, step: str) -> None:
        if self._stopping.is_set():
            return
        self.failure = err
        self._failing(failure_kind(err))
        delay = self._next_backoff(retry_cap(err, self.backoff_max, self.reconnect_max))
        log.warning(
            "%s: %s %s failed (%s); retrying in %.2fs", self.name, step, self.path, summary(err), delay
        )
        # Counted once logged: whoever sees the counter move can also find the failure in the log.
        metrics.RECONNECTS.labels(self.name).inc()
        self._stopping.wait(delay)

    def _next_backoff(self, cap: float | None = None) -> float:
        """Full-range jitter over an exponential step: spreads the workers' reconnects, never above `cap`
        (`backoff_max` by default)."""
        limit = self.backoff_max if cap is None else cap
        step = min(limit, self.backoff_initial * (2 ** min(self._failures, 30)))
        self._failures += 1
        return random.uniform(step / 2, step)

    def _activity(self) -> None:
        self.last_activity = time.monotonic()
        metrics.LAST_ACTIVITY.labels(self.name).set(time.time())
        if self.failure is not None:
            self.failure = None
            self._failing(None)

    def _failing(self, kind: str | None) -> None:
        """One series per kind of failure, 1 for the current one (all 0 while requests succeed)."""
        for each in metrics.FAILURE_KINDS:
            metrics.FAILING.labels(self.name, each).set(1 if each == kind else 0)

    def _count(self) -> None:
        if hasattr(self.store, "__len__"):
            metrics.OBJECTS.labels(self.name).set(len(self.store))  # type: ignore[arg-type]

    def _list_version(self) -> str:
        """client-go's relistResourceVersion: "0" (any cached state) before the first sync, then the last
        version seen, and "" (a consistent read) when the cache could not serve that."""
        if not self.list_from_watch_cache or self._list_consistent:
            return ""
        return self.resource_version or "0"

    def _list(self) -> None:
        asked = self._list_version()
        try:
            response = self._request({**self._selectors, "resourceVersion": asked}, self.read_timeout)
        except (_Gone, rest.ApiError) as err:
            # 410, or 504 "Too large resource version": the watch cache cannot serve this version
            if asked and (isinstance(err, _Gone) or err.status == 504):
                self._list_consistent = True
            raise
        try:
            # Each item transformed as it is decoded: a node's pods are never all held whole at once.
            body = response.read_list(self._transformed)
        finally:
            self._response = None
            response.release()
        if not isinstance(body, dict) or not isinstance(body.get("items"), list):
            raise ValueError("LIST answer has no items list")
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if self._stopping.is_set():
            raise _Stopped
        items = body["items"]
        self.store.replace(items, version)
        self.resource_version = version
        self._list_consistent = False
        self._events_since_list = 0  # the backoff is reset by a working watch, not by a LIST
        self._activity()
        self._count()
        if not self._synced.is_set():
            self._synced.set()
            metrics.SYNCED.labels(self.name).set(1)
            log.info("%s: synced %d objects at resourceVersion %s", self.name, len(body["items"]), version)

    def _transformed(self, obj: Any) -> Any:
        return self.transform(obj) if self.transform is not None and isinstance(obj, dict) else obj

    def _watch(self) -> None:
        # Between timeout_seconds and twice that, as client-go's minWatchTimeout: the watches of many
        # replicas started together do not all end, and reconnect, at the same moment.
        timeout = int(self.timeout_seconds * (1 + random.random()))
        query = {
            **self._selectors,
            "watch": "1",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout),
        }
        # The half-open guard outlives the server's own end of the watch: silence on a quiet cluster is no
        # failure. It also bounds the wait for the answer's headers.
        response = self._request(query, timeout + self.read_timeout)
        self._activity()
        try:
            for line in response.lines():
                if self._stopping.is_set():
                    raise _Stopped
                self._handle(line)
                self._failures = 0
        except rest.ReadTimeout:
            if self._stopping.is_set():
                raise _Stopped from None
            # Silent past the server's own timeout: a half-open connection. Re-watch at once; if the server
            # is really gone, that attempt fails and backs off.
            log.warning(
                "%s: watch silent for %ds past its timeout, re-watching", self.name, self.read_timeout
            )
            metrics.RECONNECTS.labels(self.name).inc()
            self._failures = 0
            return
        finally:
            self._response = None
            response.release()
        if self._stopping.is_set():
            raise _Stopped
        self._failures = 0  # the watch ran: the next failure starts from the initial delay
        self._activity()  # the server ended the watch cleanly (timeoutSeconds): we were current until now

    def _handle(self, line: bytes) -> None:
        event = json_codec.loads(line)
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch event {kind!r} without an object")
        metrics.EVENTS.labels(self.name, str(kind)).inc()
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Gone
            raise rest.ApiError(
                int(code or 0), str(obj.get("reason") or ""), str(obj.get("message") or "watch ERROR event")
            )
        if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
            raise ValueError(f"unknown watch event type {kind!r}")
        self._events_since_list += 1
        if kind != "BOOKMARK":
            self.store.apply(kind, obj if self.transform is None else self.transform(obj))
            self._count()
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        self._activity()

    # -- HTTP -----------------------------------------------------------------------------------------
    def _request(self, query: dict[str, str], read_timeout: float) -> rest.Stream:
        """GET path?query as a stream (webhook.kube.rest), kept where stop() can shut it down."""
        if self._stopping.is_set():
            raise _Stopped
        try:
            response = rest.stream(
                self._client,
                self.path,
                query,
                connect_timeout=self.connect_timeout,
                read_timeout=read_timeout,
            )
        except rest.ApiError as err:
            if err.status == 410:
                raise _Gone from None
            raise
        self._response = response
        if self._stopping.is_set():  # stop() ran while we connected and saw no response to shut down
            response.release()
            raise _Stopped
        return response


def summary(err: Exception) -> str:
    """One line, no request headers: urllib3's errors can be long and nested."""
    if isinstance(err, rest.ReadTimeout):
        return "read timed out"
    if isinstance(err, rest.Broken):
        return "connection broken"
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text}"[:300]


def _shutdown(response: rest.Stream) -> None:
    """Unblock a reader on another thread."""
    try:
        response.shutdown()
    except Exception:  # best effort: the thread is a daemon and also bounded by its read timeout
        log.debug("could not shut down the watch response", exc_info=True)


def failure_kind(err: Exception) -> str:
    """The `reason` label of `priority_webhook_cache_failing`: `forbidden` (401/403: the role lacks the
    permission, or the credentials are refused), `not_found` (404: the API server does not serve the
    collection), `unavailable` (no answer, or a 5xx) or `other` (429, a broken stream, bad JSON...)."""
    if isinstance(err, rest.ApiError):
        if err.status in (401, 403):
            return "forbidden"
        if err.status == 404:
            return "not_found"
        if err.status >= 500:
            return "unavailable"
    if isinstance(err, rest.Unreachable):
        return "unavailable"
    return "other"


def retry_cap(err: Exception, backoff_max: float, reconnect_max: float) -> float:
    """The longest wait before retrying after `err`: short while the API server is down or failing (no
    answer, or a 5xx), since what it missed meanwhile must reach the cache as soon as it answers again;
    the full backoff where it answered with a refusal (429 and other 4xx)."""
    down = isinstance(err, rest.Unreachable) or (isinstance(err, rest.ApiError) and err.status >= 500)
    return min(backoff_max, reconnect_max) if down else backoff_max


class ReflectedStore:
    """A cache fed by `self.reflector`, with the readiness every cache here shares: ready once its first
    LIST has landed, and stopped without waiting on a LIST an unresponsive API server holds (the thread is
    a daemon: after a short join it is left to die with the process rather than delay shutdown)."""

    reflector: Reflector

    def ready(self) -> bool:
        return self.reflector.synced

    def wait_ready(self, timeout: float) -> bool:
        return self.reflector.wait_synced(timeout)

    def start(self) -> None:
        self.reflector.start()

    def stop(self) -> None:
        self.reflector.stop(timeout=1.0)
