#!/usr/bin/env bash
# The main job: install what is missing, build, and replay the bundled scenario suite.
# Extra arguments are passed to `probelab run` (e.g. a scenario file, --out DIR, --seed N).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/deps.sh"
probelab_install_deps
probelab_build "$root"
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
cd "$root"
exec "$root/build/probelab" run "$@"
