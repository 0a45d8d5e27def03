#!/usr/bin/env bash
# Print the version of an operator: its crate's `version` (operators/<operator>/Cargo.toml),
# the one source of the image tag and of the chart's version and appVersion.
set -euo pipefail
op=${1:?usage: version.sh <operator>}
repo=$(cd "$(dirname "$0")/../.." && pwd)
# The first match only, read to the end (a reader that stops early would break the pipe).
sed -n '/^version = "\(.*\)"$/{s//\1/p;q}' "$repo/operators/$op/Cargo.toml" | grep . \
  || { echo "operators/$op/Cargo.toml has no literal version" >&2; exit 1; }
