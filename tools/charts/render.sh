#!/usr/bin/env bash
# Render every chart with each of its values sets (charts/<chart>/ci/*.yaml), with the
# Prometheus Operator's kinds served, into <out-dir>/<chart>-<values set>.yaml.
#   tools/charts/render.sh <helm> <out-dir>
set -euo pipefail
helm=${1:?usage: render.sh <helm> <out-dir>}
out=${2:?out-dir}
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
for chart in "$repo"/charts/*/; do
  name=$(basename "$chart")
  [ -d "$chart/ci" ] || continue
  for values in "$chart"/ci/*.yaml; do
    set_name=$(basename "$values" .yaml)
    # Helm notes the library chart's symlink on stderr; show stderr only when it fails.
    if ! errors=$("$helm" template "$name" "$chart" --namespace giantswarm --values "$values" \
      --api-versions monitoring.coreos.com/v1/ServiceMonitor \
      --api-versions monitoring.coreos.com/v1/PrometheusRule 2>&1 >"$out/$name-$set_name.yaml"); then
      echo "helm template $name with $values failed:" >&2
      echo "$errors" >&2
      exit 1
    fi
  done
done
