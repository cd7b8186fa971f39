"""cloudctl's side of the control-plane client: what its errors mean to a user.

Finding the control plane (``SLUICE_HOME``, ``SLUICE_ENDPOINT``, ``SLUICE_TOKEN``), the
channel with the bearer token and the typed errors are the shared client's,
``sluice_client/client.py`` (the Spark data source uses it too). Here a failed call becomes a
one-line :class:`CliError` with a hint, in one place, :func:`explain`, by the error's reason
(the ErrorInfo the control plane attaches), never by its message text.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import grpc

from cli.output import CliError
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import (
    DEFAULT_TIMEOUT,
    ENDPOINT_FILE,
    PID_FILE,
    TOKEN_FILE,
    ApiError,
    Client,
    Env,
    home_dir,
    write_token_file,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "ENDPOINT_FILE",
    "PID_FILE",
    "TOKEN_FILE",
    "Api",
    "ApiError",
    "Env",
    "endpoint_of",
    "explain",
    "home_dir",
    "token_of",
    "write_token_file",
]


def endpoint_of(env: Env) -> str:
    endpoint = env.endpoint()
    if not endpoint:
        raise CliError(
            f"the control plane is not running for SLUICE_HOME={env.home}",
            "start it with `cloudctl up`, or set SLUICE_ENDPOINT",
        )
    return endpoint


def token_of(env: Env) -> str:
    token = env.token()
    if not token:
        raise CliError(
            f"no API token in {env.token_path}",
            "start the control plane with `cloudctl up`, or set SLUICE_HOME to the "
            "directory it uses",
        )
    return token


class Api:
    """The shared client's stubs, with every failure explained as a :class:`CliError`."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self._connect()

    def _connect(self) -> None:
        self.endpoint = endpoint_of(self.env)
        self.client = Client(self.endpoint, token_of(self.env))
        self.clusters = self.client.clusters
        self.topics = self.client.topics
        self.status = self.client.control_plane
        self.groups = self.client.groups
        self.operations = self.client.operations
        self.logs = self.client.logs
        self.transforms = self.client.transforms

    def reconnect(self) -> None:
        """A new channel to the control plane, wherever it now runs (a restarted control
        plane may listen on another port: the endpoint file says). CliError when it is not
        running."""
        self.client.close()
        self._connect()

    def call(
        self, method: Callable[..., Any], request: Any, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """``method(request)``; a failure raises the :class:`CliError` :func:`explain` gives."""
        try:
            return self.client.call(method, request, timeout)
        except ApiError as exc:
            raise explain(exc, self.env) from None

    def try_call(
        self, method: Callable[..., Any], request: Any, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """``method(request)``; a failure raises the :class:`ApiError` (for callers that
        expect some errors, e.g. NOT_FOUND once a cluster is deleted)."""
        return self.client.call(method, request, timeout)

    def close(self) -> None:
        self.client.close()


def followed(stream: Any) -> Iterator[Any]:
    """The items of a server-streaming call, read by a thread of their own so that Ctrl-C
    reaches the main thread at once (a main thread blocked in gRPC's iterator may not see
    the signal until the next item arrives, which for a followed log may be never). On
    KeyboardInterrupt, or when the caller stops early, the call is cancelled; a failure of
    the call is raised here as the iterator raised it."""
    items: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1024)

    def read() -> None:
        try:
            for item in stream:
                items.put(("item", item))
        except BaseException as exc:  # handed to the main thread, raised there
            items.put(("error", exc))
            return
        items.put(("end", None))

    threading.Thread(target=read, name="followed-stream", daemon=True).start()
    ended = False
    try:
        while True:
            try:
                kind, value = items.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "end":
                ended = True
                return
            if kind == "error":
                ended = True
                raise value
            yield value
    finally:
        if not ended:  # Ctrl-C, or the caller stopped early
            stream.cancel()


def end_of_follow() -> NoReturn:
    """Ctrl-C ended a followed stream (``followed`` cancelled it): flush what was printed
    and exit 0 at once. Nothing is left to clean up, and the interpreter's finalization,
    with gRPC's threads still winding down the cancelled call, is skipped: an exit after
    Ctrl-C was seen to hang under load."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(0)


def _token_refused(exc: ApiError, env: Env) -> CliError:
    if env.token_override and env.token_origin:
        hint = (
            f"unset {env.token_origin} to use the token file {env.token_path}, or set it "
            "to the token of the control plane you mean"
        )
    elif env.token_override:
        hint = "give the token of the control plane you mean"
    else:
        hint = "use the SLUICE_HOME that `cloudctl up` used, or set SLUICE_TOKEN"
    return CliError(f"the control plane refused the API token from {env.token_source()}", hint)


def _unreachable(exc: ApiError, env: Env) -> CliError:
    return CliError(
        f"cannot reach the control plane at {exc.endpoint}",
        "is it running? start it with `cloudctl up`; `cloudctl status` tells",
    )


def _hint(text: str) -> Callable[[ApiError, Env], CliError]:
    """An error shown with its message and ``text`` (formatted with the error's metadata:
    ``{cluster}``, ``{group}``)."""

    def make(exc: ApiError, env: Env) -> CliError:
        about = {"cluster": "CLUSTER", "group": "GROUP", **exc.metadata}
        return CliError(exc.message, text.format(**about))

    return make


BY_REASON: dict[int, Callable[[ApiError, Env], CliError]] = {
    epb.OBJECT_STORE_UNAVAILABLE: _hint("`cloudctl status` tells whether the object store answers"),
    epb.CONTROL_PLANE_UNAVAILABLE: _unreachable,
    epb.TOPIC_NOT_FOUND: _hint("list topics with `cloudctl list-topics --cluster {cluster}`"),
    epb.GROUP_NOT_FOUND: _hint("list groups with `cloudctl list-groups --cluster {cluster}`"),
    epb.GROUP_NOT_EMPTY: _hint(
        "`cloudctl describe-group --cluster {cluster} {group}` lists its members"
    ),
    epb.BROKER_NOT_FOUND: _hint("`cloudctl describe-cluster {cluster}` lists its brokers"),
    epb.OPERATION_NOT_FOUND: _hint("list operations with `cloudctl list-operations`"),
    epb.TRANSFORM_NOT_FOUND: _hint(
        "list transforms with `cloudctl list-transforms --cluster {cluster}`"
    ),
    epb.ENDPOINT_NOT_FOUND: _hint(
        "list them with `cloudctl list-private-endpoints --cluster {cluster}`"
    ),
    epb.REPLICATOR_NOT_FOUND: _hint("list them with `cloudctl list-replicators`"),
    epb.INVALID_TRANSFORM: _hint(
        "nothing was deployed or changed; fix the module or the definition and deploy again"
    ),
}
"""Errors told apart by their reason (the ErrorInfo the control plane attaches)."""

BY_CODE: dict[grpc.StatusCode, Callable[[ApiError, Env], CliError]] = {
    # BROKER_UNAVAILABLE
    grpc.StatusCode.UNAVAILABLE: lambda exc, env: CliError(
        exc.message,
        "the cluster may be healing: check `cloudctl describe-cluster"
        + (f" {exc.metadata['cluster']}`" if "cluster" in exc.metadata else "`"),
    ),
    grpc.StatusCode.UNAUTHENTICATED: _token_refused,
    # CLUSTER_NOT_FOUND
    grpc.StatusCode.NOT_FOUND: _hint("list clusters with `cloudctl list-clusters`"),
    grpc.StatusCode.ALREADY_EXISTS: _hint("choose another name, or delete the existing one first"),
    grpc.StatusCode.FAILED_PRECONDITION: lambda exc, env: CliError(exc.message),
    grpc.StatusCode.INVALID_ARGUMENT: lambda exc, env: CliError(exc.message),
    grpc.StatusCode.DEADLINE_EXCEEDED: lambda exc, env: CliError(
        f"the control plane at {exc.endpoint} did not answer in time",
        f"see {env.home}/logs/controlplane.log",
    ),
}
"""The others, by their gRPC status code."""


def explain(exc: ApiError, env: Env) -> CliError:
    """The one mapping from a failed call to a user-facing error line with a hint."""
    make = BY_REASON.get(exc.reason) or BY_CODE.get(exc.code)
    if make is not None:
        return make(exc, env)
    return CliError(f"{exc.message} [{exc.code.name}]", f"see {env.home}/logs/controlplane.log")
