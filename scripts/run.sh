#!/usr/bin/env bash
# The main job on the embedded default, from a fresh Debian 12 machine:
# installs dependencies, builds `fathom`, then runs it. Arguments, if any,
# replace the default job and go straight to `fathom`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default --target fathom -j "$(nproc)" >/dev/null

if [ $# -gt 0 ]; then
  exec build/tools/fathom "$@"
fi
exec build/tools/fathom sim scenarios/headline.yaml
