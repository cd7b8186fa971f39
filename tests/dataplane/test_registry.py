"""The registry's table against the handler modules it names, and its lazy loading.

The table (``registry.APIS``) is what a broker serves and announces; the modules are
imported only on an API's first request. So the suite imports each of them here: a module
that fails to import, names another key or has no ``handle`` fails this test, not a
client's first request. A broker that starts loads none of them until asked (checked in a
fresh interpreter, as the broker's entry point imports the registry).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dataplane.handlers import registry
from dataplane.handlers._versions import SUPPORTED_VERSIONS
from wire.framing import kio_versions

HANDLERS = Path(registry.__file__).parent
SHARED = {"__init__", "registry", "context", "leader_hints"}


def test_every_handler_module_is_in_the_table_once() -> None:
    modules = sorted(
        p.stem for p in HANDLERS.glob("*.py") if not p.stem.startswith("_") and p.stem not in SHARED
    )
    named = [api.module for api in registry.APIS]
    assert sorted(named) == modules
    assert len({api.key for api in registry.APIS}) == len(registry.APIS)


@pytest.mark.parametrize("api", registry.APIS, ids=lambda api: api.module)
def test_each_row_names_a_module_that_serves_its_key(api: registry.Api) -> None:
    module = registry.handler_module(api)
    assert api.key == module.API_KEY
    assert callable(module.handle)
    low, high = registry.SERVED[api.key].versions
    schemas = kio_versions(api.key)
    assert schemas is not None
    assert schemas[0] <= low <= high <= schemas[1]
    # a narrowing that narrows nothing is a stale row
    if api.min_version is not None:
        assert api.min_version == low > schemas[0]
    if api.max_version is not None:
        assert api.max_version == high < schemas[1]
    assert (api.key in SUPPORTED_VERSIONS) is not api.internal


def test_a_served_api_loads_its_module_on_the_first_call() -> None:
    served = registry.Served(registry.Api(12, "heartbeat"))
    assert served.handle == served._first_call
    loaded = served.load()
    assert served.handle is loaded
    assert loaded.__module__ == "dataplane.handlers.heartbeat"


def test_a_row_naming_the_wrong_module_is_refused() -> None:
    with pytest.raises(RuntimeError, match="serves API key 12, not 13"):
        registry.handler_module(registry.Api(13, "heartbeat"))


def test_a_starting_broker_imports_no_handler_module() -> None:
    probe = (
        "import json, sys\n"
        "import dataplane.main\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('dataplane.handlers.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = set(json.loads(out))
    assert loaded <= {
        "dataplane.handlers._versions",
        "dataplane.handlers.registry",
        "dataplane.handlers.context",
        "dataplane.handlers.api_versions",  # the server's UNSUPPORTED_VERSION answer
    }, sorted(loaded)
