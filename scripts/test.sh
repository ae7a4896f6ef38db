#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs dependencies
# (scripts/setup.sh), then builds and runs ctest twice —
#   1. the default preset (g++, warnings are errors): every test, including
#      the `vm` tests that boot real rxe in qemu VMs;
#   2. the asan preset (clang, ASan+UBSan, libFuzzer targets): every test but
#      the `vm` ones (those drive external programs inside VMs) and the `mpi`
#      ones (minutes each under ASan), plus the bounded fuzz runs.
# Fails when a build fails, a test fails, a ctest run executes no test, or
# the tests leave a file behind: each ctest run gets TMPDIR = a new empty
# directory (tests write only to directories of their own in it,
# tests/scratch_dir.h, and remove them), which must be empty afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

jobs=$(nproc)

# What is left in directory $1, one path a line. Nothing is excluded: of
# the programs the tests launch, mpirun removes Open MPI's session directory
# (TMPDIR/ompi.HOST.UID), and chromium and tshark leave nothing; the qemu
# VMs' files are in the testbed's own directory under TMPDIR
# (TestbedOptions::temp_root), removed at teardown.
leftovers() {
  find "$1" -mindepth 1 -maxdepth 1 | sort
}

run_preset() {
  local preset=$1; shift
  echo "=== preset ${preset}: configure + build"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  echo "=== preset ${preset}: ctest $*"
  local tmp rc=0 left
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/fathom-ctest-XXXXXX")
  TMPDIR=${tmp} ctest --preset "${preset}" --no-tests=error -j "${jobs}" "$@" || rc=$?
  left=$(leftovers "${tmp}")
  if [[ -n ${left} ]]; then
    # Kept, not removed: they are what a test forgot to remove, or a failed
    # test's evidence.
    echo "=== preset ${preset}: the tests left these in TMPDIR=${tmp} (kept):"
    echo "${left}"
    return 1
  fi
  rmdir "${tmp}"
  return "${rc}"
}

run_preset default
# Not `mpi` under ASan either: the distributed-simulation equality runs
# oversubscribe 2-4 MPI processes of the sanitized binary on the 2 cores and
# take minutes each; they run in the default preset above.
run_preset asan -LE 'vm|mpi'
echo "=== all test runs passed"
