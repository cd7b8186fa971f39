"""Every field a handler sets on a response entity exists in some version of that entity.

Handlers build responses with ``ctx.make(resp.Entity, field=value, ...)``, naming the
entity statically; ``make`` builds it in the request's version from the fields that
version has and drops the others (a field added in v5 is absent from v3). A field no
version has would be dropped silently everywhere: a typo. This test reads the handler
modules (no broker started) and checks every keyword of every such call.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from wire.framing import entity_fields

HANDLERS = Path(__file__).resolve().parents[2] / "dataplane" / "handlers"


def _calls() -> list[tuple[str, int, int, str, list[str]]]:
    found = []
    for path in sorted(HANDLERS.glob("*.py")):
        module = importlib.import_module(f"dataplane.handlers.{path.stem}")
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "make"
                and node.args
                and isinstance(node.args[0], ast.Attribute)
                and isinstance(node.args[0].value, ast.Name)
            ):
                continue
            alias, entity = node.args[0].value.id, node.args[0].attr
            schema = getattr(module, alias, None)
            key = getattr(getattr(schema, entity, None), "__api_key__", None)
            if key is None:
                continue
            names = [k.arg for k in node.keywords if k.arg is not None]
            found.append((path.name, node.lineno, int(key), entity, names))
    return found


CALLS = _calls()


def test_handlers_name_their_response_entities() -> None:
    assert len(CALLS) > 80


@pytest.mark.parametrize(
    ("where", "line", "key", "entity", "names"), CALLS, ids=[f"{c[0]}:{c[1]}" for c in CALLS]
)
def test_every_field_exists_in_some_version(
    where: str, line: int, key: int, entity: str, names: list[str]
) -> None:
    unknown = set(names) - entity_fields(key, entity)
    assert not unknown, f"{where}:{line}: {entity} has no field {sorted(unknown)} in any version"
