#!/usr/bin/env bash
# Installs everything icetide needs on a fresh Debian machine, skipping what is there.
# Debian: a Java runtime (Spark), MariaDB and PostgreSQL servers and their JDBC drivers,
# chromium and chromium-driver (the status page's headless-browser test).
# Python: icetide itself (editable) with the capture, dev, artifacts and registry extras.
# JVM: the packages Spark needs, by Maven coordinates, resolved once by Maven into the
# jar folder (`icetide jars fetch`; skips what is already there).
# Rust, with --tests only (`make test`, .ci/run; not `make demo`): the schema registry
# the tests start, the rivven-schema crate, built once by cargo into ~/.cargo/bin. The
# first build compiles the 388 crates of its Cargo.lock: about 16 minutes on a busy
# 2-core machine; later runs skip it.
# Go, with --tests only: the S3-compatible object store the tests start, SeaweedFS's
# `weed`, built once from its Go module into Go's bin folder (docs/deploy.md has the
# build time); later runs skip it.
set -euo pipefail
TESTS=0
[ "${1:-}" = "--tests" ] && TESTS=1
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -f /usr/share/java/mariadb-java-client.jar ] || need+=(libmariadb-java)
[ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
# The status page's browser test: Debian's chromium and its driver (no browser download).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
if [ ${#need[@]} -gt 0 ]; then
  echo "install.sh: apt-get install ${need[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

cd "$(dirname "$0")/.."
if ! python3 -c "import icetide, pyspark, snowpark_connect_deps_iceberg, pytest, xdist, sqlglot, fastavro, orjson, build, hatchling, pypiserver, jsonschema, avro, google.protobuf, authlib" 2>/dev/null \
   || [ pyproject.toml -nt .install-stamp ]; then
  echo "install.sh: pip install -e .[dev,capture,artifacts,registry]"
  python3 -m pip install -q --disable-pip-version-check -e ".[dev,capture,artifacts,registry]"
  touch .install-stamp
fi

echo "install.sh: icetide jars fetch --dev (Spark packages and the test Kafka broker)"
python3 -m icetide.cli jars fetch --dev

# The tests' Confluent-compatible schema registry (tests/devservers/registry.py).
RIVVEN_VERSION=0.0.22
if [ "$TESTS" = 1 ] && ! command -v rivven-schema >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/rivven-schema" ]; then
  CARGO="$(command -v cargo || echo "$HOME/.cargo/bin/cargo")"
  echo "install.sh: cargo install rivven-schema $RIVVEN_VERSION (the tests' schema registry)"
  "$CARGO" install --locked --quiet rivven-schema --version "$RIVVEN_VERSION"
fi

# The tests' S3-compatible object store (icetide/devservers/objectstore.py). `go install
# module@version` refuses SeaweedFS (its go.mod has a replace directive), so the module
# is downloaded through the Go module proxy and built as the main module, from the
# module cache, where its go.sum pins every dependency.
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6
if [ "$TESTS" = 1 ]; then
  GO="$(command -v go || echo /usr/local/go/bin/go)"
  GOBIN_DIR="$("$GO" env GOPATH | cut -d: -f1)/bin"
  if ! command -v weed >/dev/null 2>&1 && [ ! -x "$GOBIN_DIR/weed" ]; then
    echo "install.sh: go build SeaweedFS weed $SEAWEEDFS_VERSION (the tests' object store)"
    src="$("$GO" mod download -json "github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION" \
      | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
    mkdir -p "$GOBIN_DIR"
    (cd "$src" && "$GO" build -trimpath -o "$GOBIN_DIR/weed.part" ./weed)
    mv "$GOBIN_DIR/weed.part" "$GOBIN_DIR/weed"
  fi
fi
