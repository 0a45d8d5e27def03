#!/usr/bin/env bash
# Print the version of an operator: its crate's `version` (operators/<operator>/Cargo.toml),
# the one source of the image tag and of the chart's version and appVersion.
set -euo pipefail
op=${1:?usage: version.sh <operator>}
repo=$(cd "$(dirname "$0")/../.." && pwd)
sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/operators/$op/Cargo.toml" | head -1 | grep . \
  || { echo "operators/$op/Cargo.toml has no literal version" >&2; exit 1; }
