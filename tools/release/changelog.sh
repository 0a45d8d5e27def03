#!/usr/bin/env bash
# The changelog of an operator release: the subjects of the commits since the operator's
# previous release tag (<operator>/v*) that touched it, its chart or the shared crates.
#   tools/release/changelog.sh <operator> <tag>
set -euo pipefail
op=${1:?usage: changelog.sh <operator> <tag>}
tag=${2:?tag}
prev=$(git describe --tags --abbrev=0 --match "$op/v*" "$tag^" 2>/dev/null || true)
range=${prev:+$prev..}$tag
echo "## $op ${tag#"$op"/}"
echo
if [ -n "$prev" ]; then echo "Changes since ${prev#"$op"/}:"; else echo "First release."; fi
echo
git log --no-merges --format='- %s (%h)' "$range" -- "operators/$op" "charts/$op" charts/operator-lib crates Cargo.lock
