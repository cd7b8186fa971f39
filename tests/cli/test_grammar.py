"""The grammar of cloudctl (cli/README.md, the design's CLI contract), checked mechanically over
click's command tree, and the behaviour that needs no control plane: help, exit codes,
--cluster defaults, confirmation on a terminal, time options, shell completion."""

from __future__ import annotations

import datetime
import importlib
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli.client import Env
from cli.main import MODULE_OF, all_commands, cloudctl
from cli.options import write_context
from cli.timeopt import parse_time
from tests.conftest import REPO

CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")


def _commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    """Every command by the words that run it; a group's (``billing``) as ``billing run``."""
    out: dict[str, click.Command] = {}
    commands = all_commands() if group is cloudctl else group.commands
    for name, command in commands.items():
        if isinstance(command, click.Group):
            out.update(_commands(command, f"{prefix}{name} "))
        else:
            out[f"{prefix}{name}"] = command
    return out


COMMANDS: dict[str, click.Command] = _commands(cloudctl)
CLUSTER_COMMANDS = {
    "create-cluster",
    "describe-cluster",
    "list-clusters",
    "get-bootstrap-brokers",
    "get-ca-cert",
    "get-schema-registry-url",
    "update-broker-count",
    "update-cluster-config",
    "update-cluster-security",
    "tag-cluster",
    "reboot-broker",
    "delete-cluster",
    "list-operations",
    "describe-operation",
    "logs",
}
"""The cluster noun: the cluster NAME is their argument (list-clusters, list-operations and
describe-operation aside: all clusters, NAME optional, an operation id)."""
CONTROL_PLANE_COMMANDS = {"up", "down", "status", "use-cluster", "rotate-token", "terraform-config"}
"""Of no cluster."""
INSTALLATION_COMMANDS = {
    "create-configuration",
    "update-configuration",
    "describe-configuration",
    "list-configurations",
    "delete-configuration",
    "billing run",
    "billing list-runs",
    "billing describe-run",
    "list-invoices",
    "create-replicator",
    "describe-replicator",
    "list-replicators",
    "delete-replicator",
}
"""Of every cluster at once (billing is of the installation, as a bill of the account; a
replicator joins two clusters: --source and --target name them)."""
CSV_COMMANDS = {"usage", "invoice"}
"""Tables a spreadsheet reads: -o csv as well."""


def options(command: click.Command) -> dict[str, click.Parameter]:
    return {opt: p for p in command.params for opt in getattr(p, "opts", [])}


def run(
    *args: str, env: dict[str, str] | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    if home is not None:
        environ["SLUICE_HOME"] = str(home)
    return subprocess.run(
        [CLOUDCTL, *args],
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        cwd=REPO,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_prints_table_json_or_yaml(name: str) -> None:
    output = options(COMMANDS[name]).get("-o")
    assert output is not None, f"{name} has no -o"
    assert options(COMMANDS[name])["--output"] is output
    assert isinstance(output.type, click.Choice)
    csv = ["csv"] if name in CSV_COMMANDS else []
    assert list(output.type.choices) == ["table", "json", "yaml", *csv]
    assert output.default == "table"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_the_global_options(name: str) -> None:
    found = options(COMMANDS[name])
    assert "--home" in found
    assert "--endpoint" in found
    assert {"--home", "--endpoint"} <= set(options(cloudctl))


def test_the_command_table_names_each_modules_commands_in_order() -> None:
    """cli.main lists every command with its noun module (it imports a module only for its
    own commands): the table is what the modules define, in their order."""
    by_module: dict[str, list[str]] = {}
    for name, module in MODULE_OF.items():
        by_module.setdefault(module, []).append(name)
    for module, names in by_module.items():
        defined = importlib.import_module(f"cli.{module}").COMMANDS
        assert names == [c.name for c in defined], module
    assert {f"cli.{m}" for m in by_module} >= {
        f"cli.{p.stem}" for p in (REPO / "cli").glob("*.py") if "COMMANDS = [" in p.read_text()
    }


LOADED_BY_ONE_COMMAND = """
import sys
from cli.main import main
sys.argv = ["cloudctl", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(" ".join(sorted(m for m in sys.modules if m.startswith("cli.") or m == "yaml")))
"""


def test_a_command_loads_only_its_own_noun() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOADED_BY_ONE_COMMAND, "list-topics", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    modules = set(done.stdout.strip().splitlines()[-1].split())
    assert modules & {f"cli.{m}" for m in MODULE_OF.values()} == {"cli.topic"}, done.stderr
    assert "yaml" not in modules


def test_the_nouns_are_known() -> None:
    """A new command is put in its noun here (and the README), so the rules below cover it."""
    nouns = {
        name.split("-", 1)[-1]
        for name in COMMANDS
        if name not in CONTROL_PLANE_COMMANDS | INSTALLATION_COMMANDS
    }
    assert nouns == {
        "cluster",
        "clusters",
        "bootstrap-brokers",
        "ca-cert",
        "schema-registry-url",
        "broker-count",
        "cluster-config",
        "cluster-security",
        "broker",
        "operations",
        "operation",
        "logs",
        "topic",
        "topics",
        "partitions",
        "topic-config",
        "orphans",
        "groups",
        "group",
        "offsets",
        "produce",
        "consume",
        "transform",
        "transforms",
        "user",
        "users",
        "acl",
        "acls",
        "private-endpoint",
        "private-endpoints",
        "usage",
        "invoice",
        "chart",
    }


@pytest.mark.parametrize("name", sorted(CLUSTER_COMMANDS - {"list-clusters", "describe-operation"}))
def test_cluster_commands_take_the_name_as_argument(name: str) -> None:
    arguments = [p for p in COMMANDS[name].params if isinstance(p, click.Argument)]
    assert arguments, name
    assert arguments[0].name == "name"
    assert "--cluster" not in options(COMMANDS[name])


@pytest.mark.parametrize(
    "name",
    sorted(set(COMMANDS) - CLUSTER_COMMANDS - CONTROL_PLANE_COMMANDS - INSTALLATION_COMMANDS),
)
def test_every_other_noun_takes_cluster(name: str) -> None:
    cluster = options(COMMANDS[name]).get("--cluster")
    assert cluster is not None, f"{name} has no --cluster"
    assert not cluster.required, "--cluster defaults to SLUICE_CLUSTER / use-cluster"


@pytest.mark.parametrize(
    "name", sorted(n for n in COMMANDS if n.startswith(("create-", "update-", "alter-")))
)
def test_every_create_and_update_takes_config(name: str) -> None:
    config = options(COMMANDS[name]).get("--config")
    assert config is not None, f"{name} has no --config"
    assert config.multiple


@pytest.mark.parametrize("name", sorted(n for n in COMMANDS if n.startswith("delete-")))
def test_every_delete_confirms_and_may_be_idempotent(name: str) -> None:
    found = options(COMMANDS[name])
    assert "--yes" in found
    assert "--if-exists" in found


def test_set_is_a_hidden_alias_of_config() -> None:
    for name in ("update-cluster-config", "alter-topic-config"):
        legacy = options(COMMANDS[name])["--set"]
        assert isinstance(legacy, click.Option)
        assert legacy.hidden
        assert "--set" not in CliRunner().invoke(cloudctl, [name, "--help"]).output


def test_the_readme_lists_every_command_with_its_grammar() -> None:
    readme = (REPO / "cli" / "README.md").read_text()
    for name, command in COMMANDS.items():
        assert re.search(rf"^cloudctl {re.escape(name)}\b", readme, re.M), name
        line = next(
            ln for ln in readme.splitlines() if re.match(rf"cloudctl {re.escape(name)}(\s|$)", ln)
        )
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                if param.name in ("home", "endpoint", "output"):
                    continue  # global, shown once
                assert param.opts[-1] in line or param.opts[0] in line, (name, param.opts)


def test_cloudctl_alone_prints_help_and_exits_0() -> None:
    done = run()
    assert done.returncode == 0
    assert done.stdout.startswith("Usage: cloudctl")
    assert "error" not in done.stderr
    assert "create-cluster" in done.stdout


def test_one_line_help_is_never_cut_off() -> None:
    text = CliRunner().invoke(cloudctl, ["--help"], terminal_width=80).output
    commands = text[text.index("Control plane:") :]
    assert "..." not in commands.replace("host:port[,host:port...]", "")
    for name, command in COMMANDS.items():
        assert not command.get_short_help_str(120).endswith("..."), name


def test_exit_codes() -> None:
    usage = run("create-topic", "t", "--partitions", "x")
    assert usage.returncode == 2
    assert usage.stderr.startswith("cloudctl: error: ")
    unknown = run("no-such-command")
    assert unknown.returncode == 2
    no_cluster = run("list-topics", home=Path("/nonexistent/home"))
    assert no_cluster.returncode == 2
    assert "no cluster given: add --cluster NAME, set SLUICE_CLUSTER, or choose one with " in (
        no_cluster.stderr
    )
    not_running = run("list-clusters", home=Path("/nonexistent/home"))
    assert not_running.returncode == 1
    assert not_running.stderr.count("\n") == 1
    assert "cloudctl up" in not_running.stderr


INTERRUPTED_WHILE_LOADING = """
import builtins, os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal
real = builtins.__import__
def interrupting(name, *args, **kwargs):
    if name == "click":  # the first of cli.main's own imports
        builtins.__import__ = real
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)
builtins.__import__ = interrupting
from cli.entry import main
main()
"""


def test_ctrl_c_while_the_modules_load_is_one_line_and_130() -> None:
    """The console script imports cli.entry, which catches an interrupt during the rest of
    the imports; here SIGINT arrives while cli.main's imports run."""
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "cloudctl"]
    assert script.value == "cli.entry:main"
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WHILE_LOADING, "list-clusters"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "cloudctl: error: interrupted\n"


def test_cluster_defaults_to_the_environment_then_use_cluster(tmp_path: Path) -> None:
    env = Env(tmp_path)
    write_context(env, "from-context")
    runner = CliRunner()
    # the cluster is resolved (no usage error, exit 2); then no control plane runs (exit 1)
    out = runner.invoke(cloudctl, ["list-topics"], obj=env, env={"SLUICE_CLUSTER": None})
    assert out.exit_code == 1, out.output
    chosen = runner.invoke(cloudctl, ["use-cluster", "-o", "json"], obj=env)
    assert json.loads(chosen.stdout)["cluster"] == "from-context"
    from_env = runner.invoke(
        cloudctl, ["use-cluster", "-o", "json"], obj=env, env={"SLUICE_CLUSTER": "from-env"}
    )
    assert json.loads(from_env.stdout) == {"cluster": "from-env", "source": "SLUICE_CLUSTER"}
    cleared = runner.invoke(cloudctl, ["use-cluster", "--clear", "-o", "yaml"], obj=env)
    assert cleared.exit_code == 0
    assert not (tmp_path / "context.json").exists()
    missing = runner.invoke(cloudctl, ["list-topics"], obj=env, env={"SLUICE_CLUSTER": None})
    assert missing.exit_code == 2


def test_home_and_endpoint_go_before_or_after_the_command(tmp_path: Path) -> None:
    for args in (
        ["--home", str(tmp_path), "status", "-o", "json"],
        ["status", "--home", str(tmp_path), "-o", "json"],
    ):
        done = run(*args)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["home"] == str(tmp_path)


def test_endpoint_after_get_bootstrap_brokers_names_a_private_endpoint(tmp_path: Path) -> None:
    """The global --endpoint HOST:PORT goes before the command name; after
    get-bootstrap-brokers, --endpoint (or --private-endpoint) names a private endpoint, and a
    HOST:PORT value there is still the control plane's address (a name has no colon)."""
    command = COMMANDS["get-bootstrap-brokers"]
    option = options(command)["--endpoint"]
    assert options(command)["--private-endpoint"] is option
    assert option.name == "private_endpoint"
    home = tmp_path / "home"
    address = run("get-bootstrap-brokers", "c", "--endpoint", "127.0.0.1:9", home=home)
    assert address.returncode == 1
    assert "no API token" in address.stderr, "the control plane's address was taken"
    named = run("get-bootstrap-brokers", "c", "--endpoint", "a", home=home)
    assert named.returncode == 1
    assert "the control plane is not running" in named.stderr, "a private endpoint's name"
    before = run(
        "--endpoint", "127.0.0.1:9", "get-bootstrap-brokers", "c", "--endpoint", "a", home=home
    )
    assert before.returncode == 1
    assert "no API token" in before.stderr, "the global option before the command name"


def test_a_delete_asks_on_a_terminal_and_a_no_deletes_nothing(tmp_path: Path) -> None:
    """On a terminal the question comes first (before the control plane is asked anything);
    without one (CI) there is no question: see the tests that delete."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    environ["SLUICE_HOME"] = str(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the child: cloudctl on a terminal
        os.execve(CLOUDCTL, [CLOUDCTL, "delete-topic", "--cluster", "c", "orders"], environ)
    seen = b""
    deadline = time.monotonic() + 30
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(fd, b"n\n")
            answered = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = seen.decode(errors="replace")
    assert "Delete topic 'orders' of cluster 'c' and all its records? [y/N]" in text
    assert os.waitstatus_to_exitcode(status) == 1
    assert "not confirmed; nothing was deleted (answer y, or add --yes)" in text


def test_time_options() -> None:
    now = datetime.datetime(2026, 11, 25, 8, 0, tzinfo=datetime.UTC)
    assert parse_time("-1h", now) == now - datetime.timedelta(hours=1)
    assert parse_time("-30m", now) == now - datetime.timedelta(minutes=30)
    assert parse_time("10m", now) == now - datetime.timedelta(minutes=10)
    assert parse_time("-2d", now) == now - datetime.timedelta(days=2)
    assert parse_time("2026-11-25T08:00:00Z") == now
    assert parse_time("2026-11-25T09:00:00+01:00") == now
    assert parse_time("2026-11-25T08:00:00") == now, "no zone: UTC"
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_time("yesterday")
    bad = CliRunner().invoke(cloudctl, ["logs", "c", "--since", "yesterday"])
    assert bad.exit_code == 2
    assert "ISO 8601 (2026-11-25T08:00:00Z) or a relative time (-1h, -30m)" in bad.output


def test_shell_completion() -> None:
    script = run(env={"_CLOUDCTL_COMPLETE": "bash_source"})
    assert script.returncode == 0
    assert "_cloudctl_completion" in script.stdout
    words = run(
        env={
            "_CLOUDCTL_COMPLETE": "bash_complete",
            "COMP_WORDS": "cloudctl list-",
            "COMP_CWORD": "1",
        }
    )
    assert words.returncode == 0
    offered = {line.split(",", 1)[1] for line in words.stdout.splitlines()}
    assert {"list-clusters", "list-topics", "list-groups", "list-operations"} <= offered
    readme = (REPO / "cli" / "README.md").read_text()
    assert "_CLOUDCTL_COMPLETE=bash_source cloudctl" in readme
