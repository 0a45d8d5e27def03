#!/usr/bin/env bash
# Check that an operator's versions agree: its crate version (the one source), its chart's
# version and appVersion, and, when given, the release tag (<operator>/v<version>) or image tag.
#   tools/release/check-version.sh <operator> [<tag or version>]
set -euo pipefail
op=${1:?usage: check-version.sh <operator> [<tag or version>]}
repo=$(cd "$(dirname "$0")/../.." && pwd)
crate=$("$repo/tools/release/version.sh" "$op")
chart=$repo/charts/$op/Chart.yaml
chart_version=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart")
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart")
fail=0
if [ "$chart_version" != "$crate" ]; then
  echo "charts/$op/Chart.yaml version is '$chart_version', the crate's is '$crate': set it to $crate" >&2; fail=1
fi
if [ "$app_version" != "$crate" ]; then
  echo "charts/$op/Chart.yaml appVersion is '$app_version', the crate's is '$crate': set it to \"$crate\"" >&2; fail=1
fi
if [ $# -ge 2 ]; then
  tag=${2#"$op"/}
  tag=${tag#v}
  if [ "$tag" != "$crate" ]; then
    echo "the tag names $op $tag, the crate's version is $crate: tag $op/v$crate, or bump operators/$op/Cargo.toml and the chart" >&2; fail=1
  fi
fi
[ $fail -eq 0 ] && echo "$op $crate: crate, chart version, appVersion${2:+ and tag} agree"
exit $fail
