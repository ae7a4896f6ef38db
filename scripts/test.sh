#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs dependencies
# (scripts/setup.sh), then builds and runs ctest twice —
#   1. the default preset (g++, warnings are errors): every test, including
#      the `vm` tests that boot real rxe in qemu VMs;
#   2. the asan preset (clang, ASan+UBSan, libFuzzer targets): every test but
#      the `vm` ones (those drive external programs inside VMs) and the `mpi`
#      ones (minutes each under ASan), plus the bounded fuzz runs.
# Fails when a build fails, a test fails, or a ctest run executes no test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

jobs=$(nproc)
run_preset() {
  local preset=$1; shift
  echo "=== preset ${preset}: configure + build"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  echo "=== preset ${preset}: ctest $*"
  ctest --preset "${preset}" --no-tests=error -j "${jobs}" "$@"
}

run_preset default
# Not `mpi` under ASan either: the distributed-simulation equality runs
# oversubscribe 2-4 MPI processes of the sanitized binary on the 2 cores and
# take minutes each; they run in the default preset above.
run_preset asan -LE 'vm|mpi'
echo "=== all test runs passed"
