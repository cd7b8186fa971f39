"""Generate the Python gRPC stubs from ``proto/sluice/v1/*.proto``.

    python -m proto.generate          # (re)write the *_pb2.py, *_pb2.pyi, *_pb2_grpc.py files
    python -m proto.generate --check  # exit 1 when the committed files are stale

The include root is the repository root, so generated modules import each other as
``proto.sluice.v1.…`` (the package they live in). The generated files are committed: a clean
clone works without this step; ``make venv`` re-runs it when a ``.proto`` changes, and a test
checks that the committed files match their sources.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "proto" / "sluice" / "v1"


def proto_files() -> list[Path]:
    return sorted(SOURCES.glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Run protoc (from grpcio-tools) into ``out_dir``; returns the files written."""
    include = Path(grpc_tools.__file__).parent / "_proto"
    sources = [str(p.relative_to(ROOT)) for p in proto_files()]
    args = [
        "grpc_tools.protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *sources,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("proto.generate: protoc failed")
    return sorted(out_dir.glob("proto/sluice/v1/*_pb2*"))


def generated_names() -> list[str]:
    names = []
    for proto in proto_files():
        stem = proto.stem
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_pb2_grpc.py"]
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proto.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        written = generate(Path(tmp))
        stale = [
            path.name
            for path in written
            if not (SOURCES / path.name).exists()
            or not filecmp.cmp(path, SOURCES / path.name, shallow=False)
        ]
        if args.check:
            if stale:
                print(
                    f"proto.generate: stale generated files: {', '.join(stale)} "
                    "(run `python -m proto.generate`)",
                    file=sys.stderr,
                )
                return 1
            return 0
        for path in written:
            if path.name in stale:
                (SOURCES / path.name).write_bytes(path.read_bytes())
    if stale:
        print(f"proto.generate: wrote {', '.join(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
