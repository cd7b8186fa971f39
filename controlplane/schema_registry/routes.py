"""Confluent's REST API on one cluster's registry: the paths below ``/clusters/NAME``, their
parameters and bodies (checked for types: a wrong one is 422, bad JSON 400, another content
type 415), mapped to :class:`~controlplane.schema_registry.registry.Registry` operations.

    GET    /                                                 {}
    GET    /schemas/types                                    ["JSON", "PROTOBUF", "AVRO"]
    GET    /schemas?subjectPrefix=&deleted=&latestOnly=      every version
    GET    /schemas/ids/{id}[/schema|/subjects|/versions]    ?format=serialized (Protobuf)
    GET    /subjects?deleted=&subjectPrefix=
    POST   /subjects/{s}?normalize=&deleted=                 lookup
    DELETE /subjects/{s}?permanent=
    GET    /subjects/{s}/versions?deleted=
    POST   /subjects/{s}/versions?normalize=                 register
    GET    /subjects/{s}/versions/{v}[/schema|/referencedby] v: 1.., latest, -1
    DELETE /subjects/{s}/versions/{v}?permanent=
    POST   /compatibility/subjects/{s}/versions[/{v}]?verbose=&normalize=
    GET|PUT|DELETE /config[/{s}]                             ?defaultToGlobal=
    GET|PUT /mode, GET|PUT|DELETE /mode/{s}                  ?force= ?defaultToGlobal=
"""

from __future__ import annotations

import json
from typing import Any

from controlplane.schema_registry import errors
from controlplane.schema_registry.http import Request, Response
from controlplane.schema_registry.model import (
    TYPES_LISTED,
    Compatibility,
    Mode,
    Reference,
    SchemaType,
    VersionEntry,
)
from controlplane.schema_registry.registry import LATEST, Registry, SchemaRequest

ACCEPTED = frozenset(
    {
        "application/vnd.schemaregistry.v1+json",
        "application/vnd.schemaregistry+json",
        "application/json",
        "application/octet-stream",
    }
)
MAX_VERSION = 2**31 - 1


def ok(body: Any) -> Response:
    return Response(200, body)


def json_body(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and content_type not in ACCEPTED:
        raise errors.unsupported_media_type(content_type)
    if not request.body.strip():
        raise errors.unprocessable("the request needs a JSON object as its body")
    try:
        doc = json.loads(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise errors.bad_request(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise errors.bad_request("the body's JSON nests too deeply") from None
    if not isinstance(doc, dict):
        raise errors.unprocessable("the body must be a JSON object")
    return doc


def _field(doc: dict[str, Any], name: str, kind: type, what: str) -> Any:
    value = doc.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise errors.unprocessable(f"Invalid field '{name}': expected {what}, got {value!r:.80}")
    return value


def schema_request(doc: dict[str, Any]) -> SchemaRequest:
    text = _field(doc, "schema", str, "a string (the schema's text)")
    references = []
    for item in _field(doc, "references", list, "a list of references") or ():
        if not isinstance(item, dict):
            raise errors.unprocessable("Invalid field 'references': each is an object")
        name = _field(item, "name", str, "a string")
        subject = _field(item, "subject", str, "a string")
        version = _field(item, "version", int, "an integer")
        if name is None or subject is None or version is None:
            raise errors.unprocessable(
                "Invalid field 'references': each needs name, subject and version"
            )
        references.append(Reference(name, subject, version))
    return SchemaRequest(
        schema=text or "",
        schema_type=SchemaType.parse(doc.get("schemaType")),
        references=tuple(references),
        schema_id=_field(doc, "id", int, "an integer"),
        version=_field(doc, "version", int, "an integer"),
    )


def parse_version(text: str) -> int:
    if text == "latest":
        return LATEST
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if version == LATEST:
        return LATEST
    if not 1 <= version <= MAX_VERSION:
        raise errors.invalid_version(text)
    return version


def parse_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise errors.RegistryError(404, 40403, f"Schema {text} not found") from None


async def route(registry: Registry, request: Request, path: list[str]) -> Response:  # noqa: PLR0911, PLR0912 - one case per path
    method = request.method
    match path:
        case []:
            _only(method, "GET")
            return ok({})
        case ["schemas", "types"]:
            _only(method, "GET")
            return ok([t.value for t in TYPES_LISTED])
        case ["schemas"]:
            _only(method, "GET")
            return ok(await _schemas(registry, request))
        case ["schemas", "ids", schema_id, *rest]:
            _only(method, "GET")
            return await _by_id(registry, request, parse_id(schema_id), rest)
        case ["subjects"]:
            _only(method, "GET")
            prefix = request.query.get("subjectPrefix", "")
            names = registry.subjects(request.flag("deleted"), prefix, request.flag("deletedOnly"))
            return ok(_page(request, names))
        case ["subjects", subject]:
            if method == "POST":
                found = await registry.lookup(
                    subject,
                    schema_request(json_body(request)),
                    request.flag("normalize"),
                    request.flag("deleted"),
                )
                return ok(await registry.version_json(found, request.query.get("format", "")))
            _only(method, "DELETE")
            return ok(await registry.delete_subject(subject, request.flag("permanent")))
        case ["subjects", subject, "versions"]:
            if method == "POST":
                entry = await registry.register(
                    subject, schema_request(json_body(request)), request.flag("normalize")
                )
                return ok({"id": entry.schema_id})
            _only(method, "GET")
            return ok(registry.versions(subject, request.flag("deleted")))
        case ["subjects", subject, "versions", version, *rest]:
            return await _version(registry, request, subject, parse_version(version), rest)
        case ["compatibility", "subjects", subject, "versions", *rest] if len(rest) <= 1:
            _only(method, "POST")
            against = parse_version(rest[0]) if rest else None
            return await _compatibility(registry, request, subject, against)
        case ["config", *rest] if len(rest) <= 1:
            return await _config(registry, request, rest[0] if rest else None)
        case ["mode", *rest] if len(rest) <= 1:
            return await _mode(registry, request, rest[0] if rest else None)
    raise errors.not_found("/" + "/".join(path))


def _page(request: Request, items: list[Any]) -> list[Any]:
    """``offset`` and ``limit`` (-1 or absent: all), as Confluent pages lists."""
    try:
        offset = max(0, int(request.query.get("offset", "0") or 0))
        limit = int(request.query.get("limit", "-1") or -1)
    except ValueError:
        raise errors.unprocessable("offset and limit are integers") from None
    items = items[offset:]
    return items if limit < 0 else items[:limit]


def _only(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise errors.method_not_allowed(method)


async def _schemas(registry: Registry, request: Request) -> list[dict[str, Any]]:
    prefix = request.query.get("subjectPrefix", "")
    entries = [
        e for e in registry.state.entries(request.flag("deleted")) if e.subject.startswith(prefix)
    ]
    if request.flag("latestOnly"):
        latest: dict[str, VersionEntry] = {}
        for entry in entries:
            latest[entry.subject] = entry
        entries = list(latest.values())
    fmt = request.query.get("format", "")
    return [await registry.version_json(e, fmt) for e in entries]


async def _by_id(registry: Registry, request: Request, schema_id: int, rest: list[str]) -> Response:
    deleted = request.flag("deleted")
    match rest:
        case []:
            content = registry.content_of(schema_id)
            return ok(await registry.render(content, request.query.get("format", "")))
        case ["schema"]:
            content = registry.content_of(schema_id)
            rendered = await registry.render(content, request.query.get("format", ""))
            return Response(200, None, raw=str(rendered["schema"]))
        case ["subjects"]:
            return ok(sorted({e.subject for e in registry.uses_of(schema_id, deleted)}))
        case ["versions"]:
            uses = registry.uses_of(schema_id, deleted)
            return ok([{"subject": e.subject, "version": e.version} for e in uses])
    raise errors.not_found(f"/schemas/ids/{schema_id}/" + "/".join(rest))


async def _version(
    registry: Registry, request: Request, subject: str, version: int, rest: list[str]
) -> Response:
    method = request.method
    match rest:
        case []:
            if method == "DELETE":
                permanent = request.flag("permanent")
                return ok(await registry.delete_version(subject, version, permanent))
            _only(method, "GET")
            entry = registry.entry(subject, version, request.flag("deleted"))
            return ok(await registry.version_json(entry, request.query.get("format", "")))
        case ["schema"]:
            _only(method, "GET")
            entry = registry.entry(subject, version, request.flag("deleted"))
            rendered = await registry.render(entry.content, request.query.get("format", ""))
            return Response(200, None, raw=str(rendered["schema"]))
        case ["referencedby"]:
            _only(method, "GET")
            return ok(registry.referenced_by(subject, version))
    raise errors.not_found(f"/subjects/{subject}/versions/{version}/" + "/".join(rest))


async def _compatibility(
    registry: Registry, request: Request, subject: str, version: int | None
) -> Response:
    verbose = request.flag("verbose")
    schema = schema_request(json_body(request))
    try:
        messages = await registry.check(subject, version, schema, request.flag("normalize"))
    except errors.RegistryError as exc:
        if not verbose or exc.code != 42201:
            raise
        messages = [exc.message]
    body: dict[str, Any] = {"is_compatible": not messages}
    if verbose:
        body["messages"] = messages
    return ok(body)


def _config_json(level: Compatibility, normalize: bool | None, key: str) -> dict[str, Any]:
    out: dict[str, Any] = {key: level.value}
    if normalize is not None:
        out["normalize"] = normalize
    return out


async def _config(registry: Registry, request: Request, subject: str | None) -> Response:
    method = request.method
    state = registry.state
    if method == "GET":
        config = state.configs.get(subject)
        configured = config is not None and config.compatibility is not None
        if subject is not None and not configured and not request.flag("defaultToGlobal"):
            raise errors.compatibility_not_configured(subject)
        normalize = config.normalize if config is not None else None
        return ok(_config_json(state.compatibility(subject), normalize, "compatibilityLevel"))
    if method == "PUT":
        doc = json_body(request)
        raw_level = doc.get("compatibility", doc.get("compatibilityLevel"))
        level = None if raw_level is None else Compatibility.parse(raw_level)
        normalize = _field(doc, "normalize", bool, "true or false")
        if level is None and normalize is None:
            raise errors.invalid_compatibility()
        done = await registry.set_config(subject, level, normalize)
        return ok(_config_json(done, normalize, "compatibility"))
    _only(method, "DELETE")
    previous = await registry.delete_config(subject)
    return ok({"compatibilityLevel": previous.value})


async def _mode(registry: Registry, request: Request, subject: str | None) -> Response:
    method = request.method
    if method == "GET":
        configured = subject in registry.state.modes
        if subject is not None and not configured and not request.flag("defaultToGlobal"):
            raise errors.mode_not_configured(subject)
        return ok({"mode": registry.state.mode(subject).value})
    if method == "PUT":
        doc = json_body(request)
        mode = Mode.parse(doc.get("mode"))
        done = await registry.set_mode(subject, mode, request.flag("force"))
        return ok({"mode": done.value})
    if subject is None:
        raise errors.method_not_allowed(method)
    _only(method, "DELETE")
    return ok({"mode": (await registry.delete_mode(subject)).value})
