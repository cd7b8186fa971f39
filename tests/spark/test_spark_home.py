"""The Spark home whose Python workers import the installed pyspark (spark/spark_home.py):
the workers of a real session import pyspark from the package directory, not from
Spark's pyspark.zip, and the home is used only where it is certain to change nothing else."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pyspark
import pytest

from spark.spark_home import LINKED, installed_pyspark, use_installed_pyspark


def test_python_workers_import_the_installed_pyspark(session: Any) -> None:
    assert os.environ.get("SPARK_HOME", "").endswith("spark-home"), "set by tests/conftest.py"

    def where(_: int) -> str:
        import pyspark as worker_pyspark  # noqa: PLC0415 - the worker's own import

        return str(worker_pyspark.__file__)

    found = set(session.sparkContext.parallelize(range(4), 2).map(where).collect())
    assert found == {pyspark.__file__}, found
    assert not any(".zip" in f for f in found)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    return monkeypatch


def test_a_home_links_bin_and_jars_of_the_package_only(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = use_installed_pyspark(tmp_path / "home")
    assert home == tmp_path / "home"
    assert os.environ["SPARK_HOME"] == str(home)
    package = installed_pyspark()
    assert package is not None
    assert sorted(p.name for p in home.iterdir()) == sorted(LINKED)
    for name in LINKED:
        assert (home / name).resolve() == package / name
    assert (home / "bin" / "spark-submit").is_file()
    # made again over a stale one (a venv moved): the links follow the package
    clean_env.delenv("SPARK_HOME")
    (home / "bin").unlink()
    (home / "bin").symlink_to(tmp_path)
    assert use_installed_pyspark(home) == home
    assert (home / "bin").resolve() == package / "bin"
    assert not list(tmp_path.glob(".home-*")), "no staging or old directory left"


def test_a_spark_home_of_the_users_own_is_left_alone(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("SPARK_HOME", "/opt/spark")
    assert use_installed_pyspark(tmp_path / "home") is None
    assert os.environ["SPARK_HOME"] == "/opt/spark"
    assert not (tmp_path / "home").exists()


def test_workers_on_another_interpreter_keep_sparks_zip(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    assert use_installed_pyspark(tmp_path / "home") is None
    assert "SPARK_HOME" not in os.environ
    clean_env.setenv("PYSPARK_PYTHON", sys.executable)
    assert use_installed_pyspark(tmp_path / "home") == tmp_path / "home"
