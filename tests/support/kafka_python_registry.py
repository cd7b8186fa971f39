"""A race in kafka-python 3.0.12's protocol classes, worked around for the suite.

kafka-python finds the class of a response in ``ResponseClassRegistry`` (API key -> a
``weakref.proxy`` of the class). Its metaclass drops the class keywords, so ``init=False``
never reaches ``ApiMessage.__init_subclass__``, and each versioned class made on first use
(``MetadataResponse[12]``, kept in the primary class's ``_VERSIONS``) registers itself in
the primary class's place. Two threads that ask for a new version at once (the many
kafka-python producers of ``tests/support/many_producers.py`` do) each make one; only one
stays in ``_VERSIONS``, and the registry may keep the proxy of the other. Once the collector
frees that class, every kafka-python client of the process fails to read that API's
responses (``ReferenceError: weakly-referenced object no longer exists``) and times out:
a clean-clone run lost 11 tests of one pytest-xdist worker to it.

``install`` has the registry keep the primary classes only: a versioned class never replaces
one, and the registry's lookup (``primary[version]``) finds or makes the version it needs.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_header import ResponseClassRegistry

_original = ResponseClassRegistry.register_response_class


def _register_primary(response_class: Any) -> None:
    if getattr(response_class, "_class_version", None) is None:
        _original(response_class)


def install() -> None:
    """Idempotent; before the first kafka-python client of the process."""
    ResponseClassRegistry.register_response_class = staticmethod(_register_primary)  # type: ignore[method-assign,assignment]
