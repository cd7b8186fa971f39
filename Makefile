# Sluice: `make demo` and `make test` do all setup on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CACHE := .cache
STAMP := $(VENV)/.installed
# What runs the project's processes (not pip: what it compiles stays beside the packages, for
# the venv's own commands): the project's modules compiled once, into .venv/pycache, even
# where the environment sets PYTHONDONTWRITEBYTECODE. Without it every broker, control
# plane, cloudctl and Spark worker the suite starts compiles them again (0.9 of the 2.2
# CPU-seconds a broker took to start on this machine).
RUN := PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache PYTHONDONTWRITEBYTECODE=

.PHONY: soak fuzz venv proto demo demo-broker test test-minio test-long franz-go test-peers transform-guests terraform-bin lint typecheck unit system-deps java-deps connect-deps streams-deps spark-kafka spark-cds minio kafka bench clean

venv: $(STAMP) proto

# setuptools' "Editable installation" warning box (a note about folders named like packages,
# not an error) is dropped from pip's output; everything else pip prints is kept.
HIDE_EDITABLE_BOX := awk '/Warning: Editable installation/ {s=1; n=0; next} s==1 {if ($$0 ~ /^ *!!$$/ && ++n == 2) s=2; next} s==2 {s=0; if ($$0 ~ /^    /) next} {print}'

$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing sluice and its test dependencies into $(VENV)"
	@$(PIP) install --quiet --upgrade pip
	@set -o pipefail; $(PIP) install --quiet -e '.[test,dev]' 2>&1 | $(HIDE_EDITABLE_BOX)
	@touch $(STAMP)

# gRPC stubs of the control-plane API (committed; regenerated when a .proto or the venv changes).
PROTO_SRC := $(wildcard proto/sluice/v1/*.proto)
PROTO_OUT := $(PROTO_SRC:.proto=_pb2.py) $(PROTO_SRC:.proto=_pb2.pyi) $(PROTO_SRC:.proto=_pb2_grpc.py)

proto: $(PROTO_OUT)

$(PROTO_OUT) &: $(PROTO_SRC) $(STAMP)
	@$(PY) -m proto.generate
	@touch $(PROTO_OUT)

# System packages the tests use. Checked first; installed with apt-get only when missing.
system-deps:
	@./tools/ensure-system-deps.sh

# Java jars (Kafka's reference client, Apache Kafka broker) from Maven Central into .cache/.
java-deps:
	@./tools/fetch-java-deps.sh

# Spark's own Kafka connector matching the pinned pyspark (tests/spark, bench/bench_spark.py).
spark-kafka: venv
	@./tools/fetch-spark-kafka.sh

# A class-data-sharing archive for the Spark drivers the tests start, in .cache/jvm/ (made
# once per pyspark and JDK, ~30 s; halves a driver's start-up CPU: tests/support/spark_cds.py).
spark-cds: venv
	@JAVA_TOOL_OPTIONS=-XX:TieredStopAtLevel=1 $(PY) -m tests.support.spark_cds

# MinIO, a real S3-compatible server, built from the Go module proxy (tests/tiered/test_minio.py).
minio:
	@./tools/build-minio.sh

# Kafka Connect and MirrorMaker 2 (same Kafka version) into .cache/java/connect/ (tests/ecosystem,
# the control plane's replicators).
connect-deps: java-deps
	@./tools/fetch-connect.sh

# Kafka Streams (same Kafka version) into .cache/java/streams/ (tools/java/StreamsApp.java:
# tests/ecosystem/test_streams.py, docs/streams.md).
streams-deps: java-deps
	@./tools/fetch-streams-deps.sh

kafka: java-deps

# franz-go's pkg/kgo test binary from the Go module proxy (tests/peers). Without Go or the
# proxy (exit 2/3 of the script) the peer tests skip, so `make test` goes on.
franz-go:
	@./tools/build-franz-go.sh || { rc=$$?; [[ $$rc == 2 || $$rc == 3 ]] || exit $$rc; echo "franz-go: not built; tests/peers will skip"; }

# A Terraform binary for tests/terraform: `terraform` from PATH, else OpenTofu built from the Go
# module proxy into .cache/opentofu (~6 minutes the first time; a no-op once there). Without
# either (exit 2/3 of the script: no Go, no proxy) tests/terraform skip, so `make test` goes on.
terraform-bin:
	@./tools/terraform-bin.sh || { rc=$$?; [[ $$rc == 2 || $$rc == 3 ]] || exit $$rc; echo "terraform-bin: none; tests/terraform will skip"; }

# WebAssembly transform guests (tests/transforms, tests/dataplane transforms): Redpanda's Go SDK
# examples, the batch ABI's C and AssemblyScript examples and the WAT reference guests, into
# .cache/transforms (rebuilt only when their sources change)
transform-guests:
	@./tools/build-transform-guests.sh

# franz-go's own integration tests against Apache Kafka 4.3.1 and Sluice, one row per test
# (not part of `make test`: ~15 min). e.g. make test-peers PEERS_ARGS="--target sluice --tests GroupETL"
test-peers: venv java-deps franz-go
	@$(RUN) $(PY) -m tests.peers.run $(PEERS_ARGS)

# One line per step with the time since `make demo` started, the install included (the
# demo's own steps continue the same clock: SLUICE_DEMO_T0).
demo:
	@t0=$$(date +%s.%N); \
	echo "[   0.0s] make venv: Sluice and its dependencies into $(VENV) (the first install takes about a minute; later runs check it in a second)"; \
	$(MAKE) --no-print-directory venv || exit $$?; \
	SLUICE_DEMO_T0=$$t0 $(RUN) $(PY) -m controlplane.demo

demo-broker: venv
	@$(RUN) $(PY) -m dataplane.demo

lint: venv
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check . >/dev/null || { echo "ruff format: run '$(VENV)/bin/ruff format .'"; exit 1; }

typecheck: venv
	@$(VENV)/bin/mypy

# The suite on TEST_WORKERS processes (pytest-xdist): much of a test's time is spent waiting
# for brokers, JVMs and clocks, so more workers than cores pay, until the machine saturates
# (on 2 cores, 4 workers reached a load of 29 and Spark's fixed 10 s for a Python worker to
# connect back ran out); a file's tests stay on one worker (--dist loadfile), so its module
# fixtures are made once, and the files run in collection order, longest first
# (tests/conftest.py: LONGEST_FILES). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 3
test: venv system-deps java-deps connect-deps streams-deps spark-kafka spark-cds franz-go transform-guests terraform-bin lint typecheck
	@$(RUN) $(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) $(PYTEST_ARGS)

# The tiered-storage tests against MinIO instead of the embedded S3 (not part of `make test`:
# building MinIO takes minutes and ~1 GB of Go modules).
test-minio: venv minio
	@$(RUN) $(PY) -m pytest -m minio tests/tiered/test_minio.py $(PYTEST_ARGS)

# The oracle's side of the fault tests (Apache Kafka under leader kills: minutes each).
test-long: venv system-deps java-deps streams-deps
	@$(RUN) $(PY) -m pytest -m long $(PYTEST_ARGS)

# Coverage-guided fuzzing of every parser (tests/fuzz/README.md): FUZZ_SECONDS per target,
# FUZZ_JOBS targets at once (one CPU each; default one after another); the table goes to bench/RESULTS.md. Not part of `make test` (its
# regression inputs are: tests/fuzz/test_regressions.py).
FUZZ_SECONDS ?= 600
FUZZ_JOBS ?= 1
fuzz: venv
	@$(PY) -c 'import atheris' 2>/dev/null || { echo "installing the fuzz extra (atheris) into $(VENV)"; set -o pipefail; $(PIP) install --quiet -e '.[test,dev,fuzz]' 2>&1 | $(HIDE_EDITABLE_BOX); }
	@$(RUN) $(PY) -m tests.fuzz.run --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS) --record

# The fault-injection soak (tests/chaos/README.md), as root: each of SEEDS runs MINUTES of
# faults on a 3-broker cluster whose brokers live in network namespaces of their own, then the
# Raft simulation runs RAFT_SEEDS seeds of each variant; both tables go to bench/RESULTS.md.
SEEDS ?= 1
MINUTES ?= 30
RAFT_SEEDS ?= 10000
soak: venv
	@tools/ensure-soak-deps.sh
	@test -x $(VENV)/bin/py-spy || { echo "installing the soak extra (py-spy) into $(VENV)"; set -o pipefail; $(PIP) install --quiet -e '.[test,dev,soak]' 2>&1 | $(HIDE_EDITABLE_BOX); }
	@status=0; \
	$(RUN) $(PY) -m tests.chaos.soak $(foreach s,$(SEEDS),--seed $(s)) --minutes $(MINUTES) --record || status=1; \
	$(RUN) $(PY) -m tests.chaos.raft_soak --seeds $(RAFT_SEEDS) --record || status=1; \
	exit $$status

unit: venv
	@$(RUN) $(PY) -m pytest tests/dataplane $(PYTEST_ARGS)

bench: venv system-deps java-deps spark-kafka
	@$(RUN) $(PY) -m bench.run_all

clean:
	@chmod -R u+w $(CACHE)/go 2>/dev/null || true  # Go's module cache is read-only
	rm -rf $(VENV) $(CACHE) build *.egg-info
