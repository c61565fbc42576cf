"""An in-process Kubernetes API server for tests: real HTTP on 127.0.0.1, real watch streams.

See the package docstring for usage. The HTTP layer here maps REST paths onto `Storage`, streams watches
as chunked JSON lines, and applies the fault hooks (500s, stalls, dropped streams, 410 Gone).
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonpatch
import kubernetes.client
import yaml

from testkit.kubeapi.certs import ApiCertificates, write_api_certificates
from testkit.kubeapi.resources import DEFAULT_RESOURCES, SYSTEM_PRIORITY_CLASSES, ResourceType
from testkit.kubeapi.selectors import SelectorError, parse_field_selector, parse_label_selector
from testkit.kubeapi.storage import ApiError, Storage, StoredEvent
from webhook.kube.incluster import ServiceAccount


@dataclass
class Request:
    """What a subresource handler gets."""

    server: KubeAPIServer
    method: str
    resource: ResourceType
    namespace: str
    name: str
    subresource: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON, or None


# A subresource handler returns (HTTP status, JSON body); raise ApiError for a Status answer.
SubresourceHandler = Callable[[Request], tuple[int, Any]]


@dataclass
class RequestRecord:
    """One request, logged on arrival; `status` is 0 until the answer (for a watch: its end) is known."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    watch: bool


@dataclass(eq=False)
class _Watch:
    resource: ResourceType
    connection: socket.socket
    dropped: bool = False
    expire: bool = False


@dataclass
class _Faults:
    fail_count: int = 0
    fail_status: int = 500
    fail_match: Callable[[RequestRecord], bool] | None = None
    hang_up_count: int = 0
    running: threading.Event = field(default_factory=threading.Event)  # cleared while stalled
    stall_match: Callable[[RequestRecord], bool] | None = None  # what a stall holds (None: everything)


@dataclass(frozen=True)
class _Route:
    resource: ResourceType
    namespace: str
    name: str
    subresource: str


class KubeAPIServer:
    """The test API server. Use as a context manager, or call `start()` / `stop()`."""

    def __init__(
        self,
        *,
        resources: tuple[ResourceType, ...] = DEFAULT_RESOURCES,
        system_priority_classes: bool = True,
        token: str | None = None,
        bookmark_interval: float = 1.0,
        default_watch_timeout: float = 1800.0,
        time_scale: float = 1.0,
        gone_as_http: bool = False,
        graceful_pods: bool = False,
        tls: bool = False,
        client_certificates: bool = False,
    ) -> None:
        self.storage = Storage(graceful_pods=graceful_pods)
        # TLS mode: HTTPS with a private CA; with client_certificates, a client certificate signed by that
        # CA is required (x509 client authentication), and the kubeconfig carries it.
        self.tls = tls or client_certificates
        self.client_certificates = client_certificates
        self.certificates: ApiCertificates | None = None
        self._cert_dir: tempfile.TemporaryDirectory[str] | None = None
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        # Real seconds per API second for a watch's `timeoutSeconds`: 0.01 serves an hour of 5-10 minute
        # watches in 36 s (bookmark_interval is in real seconds already).
        self.time_scale = time_scale
        self.gone_as_http = gone_as_http  # answer a too-old watch with HTTP 410 instead of an ERROR event
        self.requests: list[RequestRecord] = []
        self._resources: dict[tuple[str, str, str], ResourceType] = {}
        for rt in resources:
            self.register_resource(rt)
        self._subresources: dict[tuple[str, str, str, str], SubresourceHandler] = {}
        self._watches: set[_Watch] = set()
        # Every open client connection, so stop() can end them all: a kept-alive connection would
        # otherwise go on being served (a LIST's connection reused for the next WATCH) after stop().
        self._connections: set[socket.socket] = set()
        self.connections_accepted = 0
        self._stopped = False
        self._lock = threading.Lock()
        self._faults = _Faults()
        self._faults.running.set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        if system_priority_classes:
            for pc in SYSTEM_PRIORITY_CLASSES:
                self.create("priorityclasses", pc)

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> KubeAPIServer:
        with self._lock:
            self._stopped = False
        handler = type("Handler", (_Handler,), {"api": self})
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        if self.tls:
            self._cert_dir = tempfile.TemporaryDirectory(prefix="kubeapi-")
            self.certificates = certs = write_api_certificates(Path(self._cert_dir.name))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(certs.server_cert, certs.server_key)
            if self.client_certificates:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(certs.ca)
            # The handshake happens in the handler thread, not in the accept loop.
            self._httpd.socket = context.wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="kubeapi", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and end every connection, also one accepted or reused while stopping: from now on
        a client sees its stream break and then connection refused, as when a real API server goes away."""
        self.release()
        if self._httpd is not None:
            self._httpd.shutdown()
            with self._lock:
                self._stopped = True
                connections = list(self._connections)
            for connection in connections:
                _hang_up(connection)
            self.drop_watches()
            self._httpd.server_close()
            self._httpd = None
        if self._cert_dir is not None:
            self._cert_dir.cleanup()
            self._cert_dir = None

    def __enter__(self) -> KubeAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}"  # an IP address: str

    # -- client helpers -------------------------------------------------------------------------------
    def api_client(self) -> kubernetes.client.ApiClient:
        """A real client pointing at this server (with the bearer token if one is required)."""
        config = kubernetes.client.Configuration()
        config.host = self.url
        if self.certificates is not None:
            config.ssl_ca_cert = str(self.certificates.ca)
            if self.client_certificates:
                config.cert_file = str(self.certificates.client_cert)
                config.key_file = str(self.certificates.client_key)
        if self.token:
            config.api_key = {"authorization": self.token}
            config.api_key_prefix = {"authorization": "Bearer"}
        return kubernetes.client.ApiClient(config)

    def mount_service_account(self, folder: Path) -> Path:
        """Write the folder the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount (this
        server's token and CA) and return it."""
        assert self.certificates is not None and self.token is not None, "in-cluster needs TLS and a token"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "token").write_text(self.token)
        (folder / "ca.crt").write_bytes(self.certificates.ca.read_bytes())
        return folder

    def service_account(self, server: str | None = None) -> ServiceAccount:
        """A pod's client of this server (webhook.kube.incluster), mounted in a folder of the server's own;
        with `server`, the same service account pointed elsewhere (nothing listening, a silent peer)."""
        assert self._cert_dir is not None, "in-cluster needs TLS"
        folder = self.mount_service_account(Path(self._cert_dir.name) / "serviceaccount")
        return ServiceAccount(server or self.url, folder / "token", folder / "ca.crt")

    def kubeconfig(self, path: str | Path, *, with_client_certificate: bool = True) -> str:
        """Write a kubeconfig for this server to `path`; returns the path."""
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        cluster: dict[str, Any] = {"server": self.url}
        if self.certificates is not None:  # embedded, as kubectl writes them
            cluster["certificate-authority-data"] = _b64(self.certificates.ca)
            if self.client_certificates and with_client_certificate:
                user["client-certificate-data"] = _b64(self.certificates.client_cert)
                user["client-key-data"] = _b64(self.certificates.client_key)
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": cluster}],
            "users": [{"name": "test", "user": user}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            "current-context": "test",
        }
        with open(path, "w", encoding="utf-8") as out:
            yaml.safe_dump(doc, out)
        return str(path)

    # -- resources and extension hooks ----------------------------------------------------------------
    def register_resource(self, rt: ResourceType) -> None:
        self._resources[(rt.group, rt.version, rt.plural)] = rt

    def register_subresource(
        self, plural: str, subresource: str, method: str, handler: SubresourceHandler, *, group: str = ""
    ) -> None:
        """Serve `METHOD .../<plural>/<name>/<subresource>` with `handler(Request) -> (status, body)`."""
        self._subresources[(group, plural, subresource, method.upper())] = handler

    def resource(self, plural: str, group: str | None = None) -> ResourceType:
        """Look a resource up by plural (and group where the plural is ambiguous, like `events`)."""
        found = [
            rt
            for rt in self._resources.values()
            if rt.plural == plural and (group is None or rt.group == group)
        ]
        if not found:
            raise KeyError(f"unknown resource {plural!r}")
        if len(found) > 1:  # the core group wins for an ambiguous plural, as kubectl resolves `events`
            found.sort(key=lambda rt: rt.group != "")
        return found[0]

    # -- in-process object helpers --------------------------------------------------------------------
    def create(self, plural: str, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        return self.storage.create(self.resource(plural), obj, namespace)

    def update(self, plural: str, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        return self.storage.update(self.resource(plural), obj, namespace)

    def delete(
        self, plural: str, name: str, namespace: str = "", grace_period: int | None = None
    ) -> dict[str, Any]:
        return self.storage.delete(self.resource(plural), namespace, name, grace_period)

    def get(self, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        try:
            return self.storage.get(self.resource(plural), namespace, name)
        except ApiError:
            return None

    def list(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.storage.list(self.resource(plural), namespace)[0]

    # -- fault hooks ----------------------------------------------------------------------------------
    def fail_next(
        self, count: int, status: int = 500, match: Callable[[RequestRecord], bool] | None = None
    ) -> None:
        """The next `count` requests (those for which `match(record)` holds: method, path, query, watch)
        get `status` with a Status body; `fail_next(0)` clears."""
        with self._lock:
            self._faults.fail_count, self._faults.fail_status, self._faults.fail_match = count, status, match

    @contextlib.contextmanager
    def failing(
        self, status: int = 500, match: Callable[[RequestRecord], bool] | None = None
    ) -> Iterator[None]:
        """Every request (matching `match`) fails with `status` inside the block."""
        self.fail_next(1 << 30, status, match)
        try:
            yield
        finally:
            self.fail_next(0)

    def hang_up_next(self, count: int) -> None:
        """The next `count` requests are read and recorded, then their connection is closed unanswered (a
        server going away mid-request, or closing a kept-alive connection as a request arrives)."""
        with self._lock:
            self._faults.hang_up_count = count

    def close_idle_connections(self) -> int:
        """Close every client connection but the watches' (a server's idle timeout): a kept-alive one is
        found closed at its next use. Call it with no request in flight."""
        with self._lock:
            streaming = {watch.connection for watch in self._watches}
            idle = [connection for connection in self._connections if connection not in streaming]
        for connection in idle:
            _hang_up(connection)
        return len(idle)

    def stall(self, match: Callable[[RequestRecord], bool] | None = None) -> None:
        """Accept connections but send nothing (new requests and open watches) until `release()`; with
        `match`, only new requests for which `match(record)` holds are held, the rest are served."""
        self._faults.stall_match = match
        self._faults.running.clear()

    def release(self) -> None:
        self._faults.running.set()
        with self.storage.changed:
            self.storage.changed.notify_all()

    @contextlib.contextmanager
    def stalled(self, match: Callable[[RequestRecord], bool] | None = None) -> Iterator[None]:
        self.stall(match)
        try:
            yield
        finally:
            self.release()

    def drop_watches(self) -> int:
        """Cut every open watch stream mid-chunk (no terminating chunk): the client sees a broken read."""
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.dropped = True
            with contextlib.suppress(OSError):
                watch.connection.shutdown(socket.SHUT_RDWR)
        with self.storage.changed:
            self.storage.changed.notify_all()
        return len(watches)

    def expire_watches(self) -> int:
        """Compact the history and end every open watch with an ERROR event carrying a 410 Status."""
        self.storage.compact()
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.expire = True
        with self.storage.changed:
            self.storage.changed.notify_all()
        return len(watches)

    def compact(self) -> int:
        """Forget the history up to now: a watch from an older resourceVersion gets 410 Gone."""
        return self.storage.compact()

    @property
    def open_watches(self) -> int:
        with self._lock:
            return len(self._watches)

    def watch_count(self, path: str | None = None) -> int:
        """How many watch requests were made (optionally on one collection path)."""
        return sum(1 for r in list(self.requests) if r.watch and (path is None or r.path == path))

    def list_count(self, path: str | None = None) -> int:
        return sum(
            1
            for r in list(self.requests)
            if r.method == "GET" and not r.watch and (path is None or r.path == path)
        )

    # -- used by the handler --------------------------------------------------------------------------
    def _take_fault(self, record: RequestRecord) -> int | None:
        with self._lock:
            faults = self._faults
            if faults.fail_count > 0 and (faults.fail_match is None or faults.fail_match(record)):
                faults.fail_count -= 1
                return faults.fail_status
        return None

    def _take_hang_up(self) -> bool:
        with self._lock:
            if self._faults.hang_up_count > 0:
                self._faults.hang_up_count -= 1
                return True
        return False

    def _wait_running(self, record: RequestRecord) -> None:
        match = self._faults.stall_match
        if match is None or match(record):
            self._faults.running.wait()

    @property
    def _stalled(self) -> bool:
        return not self._faults.running.is_set() and self._faults.stall_match is None

    def _route(self, path: str) -> _Route | None:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        elif len(rest) == 2 and rest[0] == "namespaces":  # /api/v1/namespaces/NAME
            rest = ["namespaces", rest[1]]
        if not rest or len(rest) > 3:
            return None
        rt = self._resources.get((group, version, rest[0]))
        if rt is None or (namespace and not rt.namespaced):
            return None
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return _Route(rt, namespace, name, sub)

    def _subresource(self, route: _Route, method: str) -> SubresourceHandler | None:
        return self._subresources.get(
            (route.resource.group, route.resource.plural, route.subresource, method)
        )

    def _track(self, watch: _Watch, active: bool) -> None:
        with self._lock:
            if active:
                self._watches.add(watch)
                watch.dropped = watch.dropped or self._stopped
            else:
                self._watches.discard(watch)

    def _connected(self, connection: socket.socket, open_: bool) -> None:
        """Track a client connection; one that arrives after stop() is hung up at once."""
        with self._lock:
            if not open_:
                self._connections.discard(connection)
                return
            self._connections.add(connection)
            self.connections_accepted += 1
            stopped = self._stopped
        if stopped:
            _hang_up(connection)


def _hang_up(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (or a stream we cut on purpose) is normal here, not an error to print."""


class _Handler(BaseHTTPRequestHandler):
    api: KubeAPIServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.api._connected(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.api._connected(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read `api.requests`
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- dispatch -------------------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/")
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        is_watch = method == "GET" and query.get("watch") in ("1", "true")
        body = self._read_body()
        self._streaming = False
        record = self._record = RequestRecord(method, path, query, 0, is_watch)
        self.api.requests.append(record)
        if self.api._take_hang_up():
            self.close_connection = True
            _hang_up(self.connection)
            return
        self.api._wait_running(record)
        status = 500
        try:
            # The scheme is case-insensitive (RFC 7235): the client's in-cluster configuration sends "bearer".
            scheme, _, credentials = (self.headers.get("Authorization") or "").partition(" ")
            if self.api.token and (scheme.lower() != "bearer" or credentials != self.api.token):
                raise ApiError(401, "Unauthorized", "Unauthorized")
            fault = self.api._take_fault(record)
            if fault is not None:
                reason = {
                    403: "Forbidden",
                    404: "NotFound",
                    410: "Expired",
                    429: "TooManyRequests",
                }.get(fault, "InternalError")
                raise ApiError(fault, reason, f"injected fault: HTTP {fault}")
            route = self.api._route(path)
            if route is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if route.subresource:
                status = self._serve_subresource(route, method, query, body)
            elif is_watch:
                status = self._serve_watch(route, query)
            else:
                status = self._serve_rest(route, method, query, body)
        except ApiError as err:
            status = err.code
            self._send_json(err.code, err.status())
        except OSError:
            self.close_connection = True
        except Exception as err:  # a bug here must reach the client as a 500, as in the real API server
            status = 500
            self.close_connection = True
            if not self._streaming:
                self._send_json(500, ApiError(500, "InternalError", f"{type(err).__name__}: {err}").status())
            raise
        finally:
            record.status = record.status or status

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send_json(self, status: int, body: Any) -> None:
        self._record.status = status  # before the answer leaves: a client that got it sees it logged
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- plain REST -----------------------------------------------------------------------------------
    def _serve_rest(self, route: _Route, method: str, query: dict[str, str], body: Any) -> int:
        rt, storage = route.resource, self.api.storage
        if not route.name:
            if method == "GET":
                predicate = _selector(query)
                items, revision = storage.list(rt, route.namespace or None, predicate)
                self._send_json(
                    200,
                    {
                        "kind": f"{rt.kind}List",
                        "apiVersion": rt.api_version,
                        "metadata": {"resourceVersion": str(revision)},
                        "items": items,
                    },
                )
                return 200
            if method == "POST":
                self._require_object(body)
                self._send_json(201, storage.create(rt, body, route.namespace or None))
                return 201
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on a collection")
        if method == "GET":
            self._send_json(200, storage.get(rt, route.namespace, route.name))
        elif method == "PUT":
            self._require_object(body)
            if (body.get("metadata") or {}).get("name") not in (None, route.name):
                raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
            body.setdefault("metadata", {})["name"] = route.name
            self._send_json(200, storage.update(rt, body, route.namespace or None))
        elif method == "PATCH":
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            change = _patcher(content_type, body)
            self._send_json(200, storage.mutate(rt, route.namespace, route.name, change))
        elif method == "DELETE":
            options = body if isinstance(body, dict) else {}
            grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
            deleted = storage.delete(
                rt,
                route.namespace,
                route.name,
                None if grace in (None, "") else int(grace),
                options.get("preconditions"),
            )
            self._send_json(200, deleted)
        else:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")
        return 200

    @staticmethod
    def _require_object(body: Any) -> None:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the request body must be a JSON object")

    def _serve_subresource(self, route: _Route, method: str, query: dict[str, str], body: Any) -> int:
        handler = self.api._subresource(route, method)
        if handler is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        request = Request(
            self.api,
            method,
            route.resource,
            route.namespace,
            route.name,
            route.subresource,
            query,
            dict(self.headers.items()),
            body,
        )
        status, answer = handler(request)
        self._send_json(status, answer)
        return status

    # -- watch ----------------------------------------------------------------------------------------
    def _serve_watch(self, route: _Route, query: dict[str, str]) -> int:
        rt, storage, api = route.resource, self.api.storage, self.api
        predicate = _selector(query)
        requested = query.get("resourceVersion", "")
        timeout = float(query.get("timeoutSeconds") or api.default_watch_timeout) * api.time_scale
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        initial: list[dict[str, Any]] = []
        if requested in ("", "0"):
            initial, revision = storage.list(rt, route.namespace or None, predicate)
        else:
            try:
                revision = int(requested)
            except ValueError as err:
                raise ApiError(400, "BadRequest", f"invalid resource version: {requested!r}") from err
            try:
                storage.events_after(rt, revision)
            except ApiError as gone:
                if api.gone_as_http:
                    raise
                self._start_stream()
                self._chunk({"type": "ERROR", "object": gone.status()})
                self._end_stream()
                return 200

        self._start_stream()
        watch = _Watch(rt, self.connection)
        api._track(watch, True)
        try:
            for obj in initial:
                self._chunk({"type": "ADDED", "object": obj})
            self._stream(watch, route, predicate, revision, timeout, bookmarks)
        finally:
            api._track(watch, False)
        return 200

    def _stream(
        self,
        watch: _Watch,
        route: _Route,
        predicate: Callable[[dict[str, Any]], bool],
        revision: int,
        timeout: float,
        bookmarks: bool,
    ) -> None:
        storage, api, rt = self.api.storage, self.api, route.resource
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + api.bookmark_interval
        while True:
            with storage.changed:
                while True:
                    if watch.dropped:
                        self.close_connection = True
                        return  # no terminating chunk: the client sees the stream break
                    now = time.monotonic()
                    if not api._stalled and (
                        watch.expire
                        or now >= deadline
                        or storage.revision > revision
                        or (bookmarks and now >= next_bookmark)
                    ):
                        break
                    wake = min(deadline, next_bookmark if bookmarks else deadline)
                    storage.changed.wait(max(0.0, min(wake - now, 0.5)))
                if watch.expire:
                    self._chunk(
                        {
                            "type": "ERROR",
                            "object": ApiError(
                                410, "Expired", f"too old resource version: {revision} ({storage.compacted})"
                            ).status(),
                        }
                    )
                    self._end_stream()
                    return
                try:
                    events, head = storage.events_after(rt, revision)
                except ApiError as gone:
                    self._chunk({"type": "ERROR", "object": gone.status()})
                    self._end_stream()
                    return
            for event in events:
                converted = _convert(event, route.namespace, predicate)
                if converted is not None:
                    self._chunk(converted)
            revision = head
            now = time.monotonic()
            if bookmarks and now >= next_bookmark:
                self._chunk(
                    {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": rt.kind,
                            "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(revision)},
                        },
                    }
                )
                next_bookmark = now + api.bookmark_interval
            if now >= deadline:
                self._end_stream()
                return

    def _start_stream(self) -> None:
        self._streaming = True
        self._record.status = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _selector(query: dict[str, str]) -> Callable[[dict[str, Any]], bool]:
    try:
        fields = parse_field_selector(query.get("fieldSelector"))
        labels = parse_label_selector(query.get("labelSelector"))
    except SelectorError as err:
        raise ApiError(400, "BadRequest", str(err)) from err
    return lambda obj: fields(obj) and labels(obj)


def _convert(
    event: StoredEvent, namespace: str, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any] | None:
    """The cacher's filtering: an object entering the selector is ADDED, leaving it is DELETED.

    A DELETED for an object that left the selector carries its previous content with the event's
    resourceVersion (k8s.io/apiserver cacher.go, convertToWatchEvent).
    """
    if namespace and event.object["metadata"].get("namespace") != namespace:
        return None
    current = event.type != "DELETED" and predicate(event.object)
    previous = event.previous is not None and predicate(event.previous)
    if current and not previous:
        return {"type": "ADDED", "object": event.object}
    if current and previous:
        return {"type": "MODIFIED", "object": event.object}
    if previous:
        gone = json.loads(json.dumps(event.previous))
        gone["metadata"]["resourceVersion"] = str(event.revision)
        return {"type": "DELETED", "object": gone}
    return None


def _patcher(content_type: str, patch: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Merge patch (RFC 7386) for merge and strategic-merge content types; RFC 6902 for json-patch."""
    if content_type == "application/json-patch+json":
        if not isinstance(patch, list):
            raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")

        def apply_json_patch(obj: dict[str, Any]) -> dict[str, Any]:
            try:
                return jsonpatch.apply_patch(obj, patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
                raise ApiError(422, "Invalid", f"the JSON patch cannot be applied: {err}") from err

        return apply_json_patch
    if content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
        return lambda obj: _merge(obj, patch)
    raise ApiError(415, "UnsupportedMediaType", f"the patch content type {content_type!r} is not supported")


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result
