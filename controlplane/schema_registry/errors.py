"""The registry's errors, as Confluent's Schema Registry answers them: an HTTP status and a body
``{"error_code": N, "message": "..."}``, with Confluent's codes and messages (its
``rest/exceptions/Errors.java``). Everything below the HTTP layer raises :class:`RegistryError`;
``http.py`` turns it into the response, once.
"""

from __future__ import annotations

from typing import Any

LEVELS_HINT = (
    "Invalid compatibility level. Valid values are none, backward, forward, full, "
    "backward_transitive, forward_transitive, and full_transitive"
)
MODES_HINT = "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT."


class RegistryError(Exception):
    """An answer other than 2xx: ``status`` (HTTP), ``code`` (Confluent's error_code)."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error_code": self.code, "message": self.message}


# ---------------------------------------------------------------- 404


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(404, 40403, "Schema not found")
    return RegistryError(404, 40403, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404,
        40404,
        f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted."
        "Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being "
        "permanently deleted",
    )


def compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def not_found(what: str) -> RegistryError:
    """A path the registry does not serve (Jersey's 404)."""
    return RegistryError(404, 404, f"HTTP 404 Not Found: {what}")


# ---------------------------------------------------------------- 409 / 422


def incompatible(subject: str, messages: list[str]) -> RegistryError:
    """Confluent through 8.1 answers error_code 409 (its newest releases say 40901)."""
    details = "[" + ", ".join(messages) + "]"
    return RegistryError(
        409,
        409,
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}"'
        f", details: {details}",
    )


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(version: str) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility(message: str = LEVELS_HINT) -> RegistryError:
    return RegistryError(422, 42203, message)


def invalid_mode(message: str = MODES_HINT) -> RegistryError:
    return RegistryError(422, 42204, message)


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(subject: str, version: int) -> RegistryError:
    key = f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}"
    return RegistryError(422, 42206, f"One or more references exist to the schema {key}.")


def id_does_not_match(message: str) -> RegistryError:
    return RegistryError(422, 42207, message)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not a valid.")


def schema_too_large(message: str) -> RegistryError:
    return RegistryError(422, 42209, message)


def unprocessable(message: str) -> RegistryError:
    """A body whose fields have the wrong type (Jackson's mapping errors: 422)."""
    return RegistryError(422, 422, message)


# ---------------------------------------------------------------- transport and backend


def bad_request(message: str) -> RegistryError:
    """Malformed JSON and other unreadable requests (400, as Confluent's rest-utils)."""
    return RegistryError(400, 400, message)


def unauthorized(message: str = "Unauthorized") -> RegistryError:
    return RegistryError(401, 401, message)


def method_not_allowed(method: str) -> RegistryError:
    return RegistryError(405, 405, f"HTTP 405 Method Not Allowed: {method}")


def too_large(size: int, limit: int, key: str) -> RegistryError:
    return RegistryError(
        413,
        413,
        f"request body of {size} bytes is over the limit of {limit} bytes ({key}); send a "
        "smaller schema or raise the setting",
    )


def unsupported_media_type(content_type: str) -> RegistryError:
    return RegistryError(
        415,
        415,
        f"HTTP 415 Unsupported Media Type: {content_type!r}; send Content-Type "
        "application/vnd.schemaregistry.v1+json or application/json",
    )


def store_error(message: str) -> RegistryError:
    """The cluster's ``_schemas`` topic could not be read or written (Confluent's 50001)."""
    return RegistryError(500, 50001, message)


def timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, message)


def unavailable(message: str) -> RegistryError:
    """The cluster is not there to serve (being created or deleted): retry later."""
    return RegistryError(503, 50003, message)
