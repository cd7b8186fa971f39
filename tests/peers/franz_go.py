"""franz-go's own pkg/kgo tests as a peer suite: build, pick, classify and run them.

The test binary comes from ``tools/build-franz-go.sh`` (``build()``), with the module's source
beside it in ``.cache/peers/franz-go/src``. Which tests need a broker and which broker features
they need is read from that source (``analyse()``), never from a list of names:

* **needs a broker**: the test reaches, through the package's own test helpers, the one
  function that reads ``KGO_SEEDS`` (``getSeedBrokers`` in v1.22.3). Found by a call graph over
  the ``*_test.go`` files: every top-level ``func`` (and method) is a node, every identifier in
  its body that names another one is an edge. Cross-checked once by running all 153 tests with
  KGO_SEEDS at a socket that accepts and closes: exactly the same 36 tests connected.
* **needs a feature** (the whole test, not one subtest): the test's own body
    - uses ``TransactionalID(`` / ``BeginTransaction`` / ``GroupTransactSession`` → transactions;
    - opens with ``if !allowShare {`` ... ``t.Skip`` (franz-go's own guard) → share groups;
    - opens with ``if !allow848 {`` ... ``t.Skip`` → the KIP-848 consumer protocol.
  Guards nested in subtests (``if tc.enable848 && !allow848``) do not count: franz-go skips
  those subtests itself and the run reports them (``Outcome.subtest_skips``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
BUILD_SCRIPT = REPO / "tools" / "build-franz-go.sh"
CACHE = REPO / ".cache" / "peers" / "franz-go"
BINARY = CACHE / "kgo.test"
SOURCE = CACHE / "src" / "pkg" / "kgo"

# tools/build-franz-go.sh's exit statuses that mean "cannot build here" rather than "broken"
EXIT_NO_GO = 2
EXIT_DOWNLOAD_FAILED = 3


class BuildUnavailable(RuntimeError):
    """Go is missing or the module cannot be downloaded: the peer suite cannot run here."""


def build(*, quiet: bool = False) -> Path:
    """Run tools/build-franz-go.sh (cached) and return the test binary.

    Raises BuildUnavailable when Go is absent or the download fails, RuntimeError when the
    build itself fails."""
    proc = subprocess.run(
        [str(BUILD_SCRIPT)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    output = (proc.stdout + proc.stderr).strip()
    if not quiet and output:
        print(output, flush=True)
    if proc.returncode in (EXIT_NO_GO, EXIT_DOWNLOAD_FAILED):
        said = [line for line in output.splitlines() if line.startswith("franz-go:")]
        raise BuildUnavailable(
            said[-1].removeprefix("franz-go: ") if said else output or "franz-go build unavailable"
        )
    if proc.returncode != 0 or not BINARY.exists():
        raise RuntimeError(f"tools/build-franz-go.sh failed ({proc.returncode}):\n{output}")
    return BINARY


def list_tests(binary: Path = BINARY) -> list[str]:
    """The binary's top-level Test* functions (``-test.list``), in its order."""
    out = subprocess.run(
        [str(binary), "-test.list", "^Test"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.startswith("Test")]


# ---------------------------------------------------------------------- source analysis


# A feature a test needs, and the API keys a broker must advertise for it.
@dataclass(frozen=True)
class Feature:
    name: str
    api_keys: tuple[int, ...]
    """ApiVersions keys that must all be advertised: the feature is missing otherwise."""
    issue: str
    """What will bring the feature to Sluice."""


TRANSACTIONS = Feature(
    "transactions", (24, 26), "issue 18 (transactions)"
)  # AddPartitionsToTxn, EndTxn
SHARE_GROUPS = Feature(
    "share groups", (76, 78, 79), "not planned yet"
)  # ShareGroupHeartbeat, ShareFetch, ShareAcknowledge
KIP_848 = Feature("KIP-848 consumer protocol", (68,), "not planned yet")  # ConsumerGroupHeartbeat
FEATURES = (TRANSACTIONS, SHARE_GROUPS, KIP_848)

_FUNC = re.compile(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)", re.MULTILINE)
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_TXN_USE = re.compile(r"\bTransactionalID\(|\bBeginTransaction\(|\bGroupTransactSession\b")
# gofmt'd top-level statement of the test body: one tab of indentation
_GUARD = re.compile(r"^\tif !(allowShare|allow848) \{\n\t\tt\.Skip", re.MULTILINE)
_GUARD_FEATURE = {"allowShare": SHARE_GROUPS, "allow848": KIP_848}


def _strip_go(body: str) -> str:
    """Go source without comments and string literals (their words are not references)."""
    body = re.sub(r"/\*.*?\*/", " ", body, flags=re.DOTALL)
    body = re.sub(r"//[^\n]*", " ", body)
    body = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', body)
    return re.sub(r"`[^`]*`", '""', body)


def _functions(source: Path) -> dict[str, list[str]]:
    """Top-level funcs and methods of the package's test files: name -> bodies (methods of
    different types may share a name). gofmt puts a top-level closing brace at column 0."""
    funcs: dict[str, list[str]] = {}
    for path in sorted(source.glob("*_test.go")):
        text = path.read_text(errors="replace")
        for match in _FUNC.finditer(text):
            end = text.find("\n}\n", match.start())
            body = text[match.start() : end + 3 if end >= 0 else len(text)]
            funcs.setdefault(match.group(1), []).append(body)
    return funcs


@dataclass
class KgoTest:
    name: str
    needs_broker: bool
    features: list[Feature] = field(default_factory=list)
    uses_848_subtests: bool = False
    """Some subtests run with the KIP-848 protocol (franz-go skips them without key 68)."""


def analyse(tests: list[str], source: Path = SOURCE) -> dict[str, KgoTest]:
    """Which of ``tests`` need a broker, and the features each needs (module docstring)."""
    funcs = _functions(source)
    names = set(funcs)
    refs = {
        name: set(_IDENT.findall(" ".join(_strip_go(b) for b in bodies))) & names
        for name, bodies in funcs.items()
    }
    broker = {name for name, bodies in funcs.items() if any("KGO_SEEDS" in b for b in bodies)}
    if not broker:
        raise RuntimeError(f"no function in {source} reads KGO_SEEDS: has franz-go changed?")
    changed = True
    while changed:
        changed = False
        for name, called in refs.items():
            if name not in broker and called & broker:
                broker.add(name)
                changed = True
    infos: dict[str, KgoTest] = {}
    for test in tests:
        body = "\n".join(_strip_go(b) for b in funcs.get(test, []))
        info = KgoTest(test, needs_broker=test in broker)
        if _TXN_USE.search(body):
            info.features.append(TRANSACTIONS)
        for guard in _GUARD.findall(body):
            feature = _GUARD_FEATURE[guard]
            if feature not in info.features:
                info.features.append(feature)
        info.uses_848_subtests = KIP_848 not in info.features and "enable848" in body
        infos[test] = info
    return infos


# ---------------------------------------------------------------------- running one test


@dataclass
class Outcome:
    test: str
    status: str
    """pass, fail, skip (franz-go skipped it), timeout, error (no verdict line)"""
    seconds: float
    log_path: Path
    tail: list[str]
    subtest_skips: list[str] = field(default_factory=list)
    """"Name: reason" of each subtest franz-go skipped itself."""
    skip_reason: str = ""


_VERDICT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")
_HEADER = re.compile(r"^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)")
_MESSAGE = re.compile(r"^\s+\w+_test\.go:\d+: (.*)")


def kgo_env(seeds: str, rf: int, records: int | None) -> dict[str, str]:
    """The environment of one run: ours without any KGO_* variable, plus the three the
    integration tests read."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGO_")}
    env["KGO_SEEDS"] = seeds
    env["KGO_TEST_RF"] = str(rf)
    if records:
        env["KGO_TEST_RECORDS"] = str(records)
    return env


def run_kgo_test(
    test: str,
    env: Mapping[str, str],
    log_path: Path,
    *,
    timeout: float,
    binary: Path = BINARY,
    tail_lines: int = 25,
) -> Outcome:
    """Run one test in its own process (``-test.run ^T$ -test.v``), output to ``log_path``.

    Go's own ``-test.timeout`` is 10 s shorter than ``timeout`` so that a hung test prints its
    goroutines; the process group is SIGKILLed at ``timeout`` if it still runs."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    go_timeout = max(5, int(timeout) - 10)
    cmd = [
        str(binary),
        "-test.run",
        f"^{test}$",
        "-test.v",
        "-test.count",
        "1",
        "-test.timeout",
        f"{go_timeout}s",
    ]
    started = time.monotonic()
    killed = False
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=SOURCE if SOURCE.is_dir() else None,
            start_new_session=True,
        )
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seconds = time.monotonic() - started
    return parse_output(test, log_path, seconds, killed=killed, tail_lines=tail_lines)


def parse_output(
    test: str, log_path: Path, seconds: float, *, killed: bool = False, tail_lines: int = 25
) -> Outcome:
    """Verdicts from ``-test.v`` output. A test's ``t.Log``/``t.Skip`` lines ("    x_test.go:N:
    message") follow the ``=== RUN|CONT|NAME  name`` header of the (sub)test that wrote them,
    possibly long before its ``--- SKIP`` line when subtests run in parallel."""
    lines = log_path.read_text(errors="replace").splitlines()
    status = "error"
    current = test
    messages: dict[str, list[str]] = {}
    skipped: list[str] = []
    for line in lines:
        header = _HEADER.match(line)
        if header:
            current = header.group(1)
            continue
        message = _MESSAGE.match(line)
        if message:
            messages.setdefault(current, []).append(message.group(1).strip())
            continue
        verdict = _VERDICT.match(line)
        if verdict:
            if verdict.group(2) == test:
                status = verdict.group(1).lower()
            elif verdict.group(1) == "SKIP":
                skipped.append(verdict.group(2))
    if killed or any(line.startswith("panic: test timed out") for line in lines):
        status = "timeout"
    return Outcome(
        test,
        status,
        seconds,
        log_path,
        lines[-tail_lines:],
        subtest_skips=[f"{name}: {_skip_message(messages.get(name, []))}" for name in skipped],
        skip_reason=_skip_message(messages.get(test, [])) if status == "skip" else "",
    )


_SKIP_WORDS = re.compile(r"(?i)skip|support|require|still takes")


def _skip_message(messages: list[str]) -> str:
    """The t.Skip message among a skipped test's messages: deferred t.Log calls may follow it
    ("... completed in 4µs"), so the one that reads like a reason wins, else the first."""
    for message in messages:
        if _SKIP_WORDS.search(message):
            return message
    return messages[0] if messages else "?"
