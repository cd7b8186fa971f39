"""The house rules, checked mechanically over the source tree (no process is started).

- No import cycle between first-party modules, counting imports inside functions, under
  ``TYPE_CHECKING`` (a type-only dependency is still a dependency) and by
  ``importlib.import_module`` (a module named by a string is still a dependency).
- ``wire`` imports nothing of Sluice; ``dataplane`` never imports the control plane or a
  client; the clients (``cli``, ``spark``, ``terraform``) use public APIs only: the wire
  package, the generated API stubs, the control plane's client module and ``tiered``'s
  object-store layer.
- No product module over 800 lines; a README in every package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT = [
    "wire",
    "dataplane",
    "controlplane",
    "tiered",
    "transforms",
    "spark",
    "pyspark_sluice",
    "cli",
    "terraform",
    "proto",
    "sluice_client",
    "billing",
]
MAX_LINES = 800
CLIENT_MAY_IMPORT = {
    "cli": ("cli", "wire", "proto", "sluice_client"),
    "spark": ("spark", "wire", "proto", "sluice_client", "tiered", "pyspark_sluice"),
    "pyspark_sluice": ("spark", "pyspark_sluice"),
    "terraform": ("terraform", "wire", "proto", "sluice_client"),
    "billing": ("billing", "wire", "spark", "tiered", "pyspark_sluice", "sluice_client"),
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PRODUCT:
        for path in (REPO / package).rglob("*.py"):
            if "_pb2" in path.name:
                continue
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _dynamic(node: ast.Call, literals: set[str]) -> list[str] | None:
    """The modules an ``importlib.import_module(...)`` call may import (None for any other
    call): the one a literal names; for an f-string of a literal prefix and one name
    (``f"cli.{noun}"``), the prefix followed by any string literal of the same file that
    makes a first-party module (the nouns its table names: ``"cluster"``, ``"topic"``).
    An argument computed otherwise (``context``'s: the ``__module__`` of a class already
    loaded) adds no edge; the test below fails on an f-string that resolves to nothing."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name != "import_module" or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        found = [f"{prefix}{s}" for s in sorted(literals) if f"{prefix}{s}" in MODULES]
        return found or [f"?{prefix}"]
    return []


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every first-party module ``module`` imports, wherever the import statement is, and
    whatever its ``importlib.import_module`` calls may load."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    literals = {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] or [base]
        elif isinstance(node, ast.Call) and (found := _dynamic(node, literals)) is not None:
            targets = found
        else:
            continue
        for target in targets:
            if target.startswith("?"):  # an f-string import the checker cannot resolve
                yield target
                continue
            resolved = _resolve(target)
            if resolved is not None and resolved != module:
                yield resolved


GRAPH = {m: set(_imports(m, p)) for m, p in MODULES.items()}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v] & GRAPH.keys():
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_the_checker_sees_the_modules_loaded_by_name() -> None:
    """cloudctl loads its nouns and the broker its handlers by name: both must be edges of
    the graph, or a cycle through them would go unseen."""
    assert {"cli.topic", "cli.cluster"} <= GRAPH["cli.main"]
    assert {"dataplane.handlers.produce", "dataplane.handlers.fetch"} <= GRAPH[
        "dataplane.handlers.registry"
    ]
    assert "cli.entry" not in GRAPH["cli.main"]
    unresolved = {m: sorted(t for t in ts if t.startswith("?")) for m, ts in GRAPH.items()}
    assert {m: ts for m, ts in unresolved.items() if ts} == {}


def _top(module: str) -> str:
    return module.split(".", maxsplit=1)[0]


def test_wire_imports_nothing_of_sluice() -> None:
    bad = {m: sorted(GRAPH[m]) for m in GRAPH if _top(m) == "wire" and GRAPH[m] - set(MODULES)}
    outside = {
        m: sorted(t for t in GRAPH[m] if _top(t) != "wire") for m in GRAPH if _top(m) == "wire"
    }
    assert not bad
    assert not {m: t for m, t in outside.items() if t}


def test_the_client_package_imports_only_the_api() -> None:
    """sluice_client is shared by the clients and the server: it imports neither."""
    bad = {
        m: sorted(t for t in GRAPH[m] if _top(t) not in {"sluice_client", "proto"})
        for m in GRAPH
        if _top(m) == "sluice_client"
    }
    assert not {m: t for m, t in bad.items() if t}


def test_dataplane_does_not_import_controlplane_or_clients() -> None:
    forbidden = {"controlplane", "cli", "spark", "terraform", "pyspark_sluice"}
    bad = {
        m: sorted(t for t in GRAPH[m] if _top(t) in forbidden)
        for m in GRAPH
        if _top(m) == "dataplane"
    }
    assert not {m: t for m, t in bad.items() if t}


@pytest.mark.parametrize("client", sorted(CLIENT_MAY_IMPORT))
def test_clients_use_public_apis_only(client: str) -> None:
    allowed = CLIENT_MAY_IMPORT[client]
    bad = {
        m: sorted(t for t in GRAPH[m] if not any(t == a or t.startswith(a + ".") for a in allowed))
        for m in GRAPH
        if _top(m) == client
    }
    assert not {m: t for m, t in bad.items() if t}


def test_no_product_module_over_800_lines() -> None:
    long = {
        str(path.relative_to(REPO)): n
        for path in MODULES.values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long


def test_every_package_has_a_readme() -> None:
    packages = {
        p.parent
        for p in MODULES.values()
        if p.name == "__init__.py"
        and p.parent.parent != REPO / "proto"  # generated stubs
        and p.parent.parent.parent != REPO / "proto"
    }
    packages |= {REPO / name for name in PRODUCT}
    packages |= {REPO / "tests", REPO / "bench"}
    missing = sorted(str(p.relative_to(REPO)) for p in packages if not (p / "README.md").exists())
    assert not missing


def test_transform_engine_imports_only_wire() -> None:
    """The engine knows nothing of brokers: the broker drives it (dataplane/transforms)."""
    bad = {
        m: sorted(t for t in GRAPH[m] if _top(t) not in {"transforms", "wire"})
        for m in GRAPH
        if _top(m) == "transforms"
    }
    assert not {m: t for m, t in bad.items() if t}


def test_the_broker_reads_wall_time_through_its_clock_only() -> None:
    """``dataplane/clock.py`` is the one seam a fault test skews: no other broker module
    reads ``time.time``/``time.time_ns`` (intervals use ``time.monotonic``)."""
    found = []
    for path in sorted((REPO / "dataplane").rglob("*.py")):
        if path.name == "clock.py" and path.parent.name == "dataplane":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("time", "time_ns")
                and isinstance(node.value, ast.Name)
                and node.value.id == "time"
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == [], "read wall time through dataplane.clock: " + ", ".join(found)
