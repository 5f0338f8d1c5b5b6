# Sourced by each layer of keybus's CI (.ci/fast, compat, model, stress,
# safety, bench, fuzz): strict mode, the repository root as the working
# directory, cargo's output settings, and the stage timer that prints each
# stage's wall time. Not run on its own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

stage() { printf '\n==== %s ====\n' "$*"; STAGE_START=$(date +%s); }
done_stage() { printf -- '---- done in %ss\n' "$(( $(date +%s) - STAGE_START ))"; }

export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0

# Under `.ci/run` the fast layer's docs.rs stage installs the nightly toolchain
# before any later layer needs it; a layer run alone installs it itself. The
# guard keeps `.ci/run`'s commands what they were before the split.
needs_nightly() {
  [[ -n ${KEYBUS_CI_RUN:-} ]] || rustup toolchain install nightly --profile minimal >/dev/null 2>&1 || true
}
