#!/usr/bin/env bash
# Build an operator image with buildah, offline, from operators/<operator>/Containerfile:
#   tools/images/build-image.sh <operator> <binary> <out-dir>
# 1. A base root filesystem is assembled from this Debian system's own files: the shared
#    libraries the binary links (ldd: glibc, libgcc), the dynamic loader, the CA bundle, and
#    passwd/group entries for nonroot (uid 65532). No shell, no package manager.
# 2. The binary is stripped into the build context as dist/<arch>/<operator>.
# 3. buildah builds the Containerfile with BASE_IMAGE pointing at that base, VERSION from the
#    operator crate, REVISION from git.
# 4. The image is written as an OCI layout to <out-dir>/<operator>.oci, and its uncompressed
#    size (the sum of its layers' tar streams) printed and written to <out-dir>/<operator>.size.
# buildah keeps its storage under <out-dir>/storage (vfs driver): nothing global is touched.
set -euo pipefail

op=${1:?usage: build-image.sh <operator> <binary> <out-dir>}
bin=${2:?binary}
out=${3:?out-dir}
repo=$(cd "$(dirname "$0")/../.." && pwd)
containerfile=$repo/operators/$op/Containerfile
[ -f "$containerfile" ] || { echo "no Containerfile for $op at $containerfile" >&2; exit 1; }
command -v buildah >/dev/null || { echo "buildah is missing: run 'make image-tools' (Debian package buildah)" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
version=${VERSION:-$("$repo/tools/release/version.sh" "$op")}
revision=${REVISION:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)}
arch=$(dpkg --print-architecture)
buildah=(buildah --root "$out/storage/root" --runroot "$out/storage/run" --storage-driver vfs)

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

# 1. The base.
base=$ctx/base
mkdir -p "$base/etc/ssl/certs" "$base/tmp" "$base/home/nonroot" "$base/usr/local/bin"
chmod 1777 "$base/tmp"
interp=$(readelf -l "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
libs=$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
for f in $interp $libs; do
  cp --parents -L "$f" "$base/"
done
cp -L /etc/ssl/certs/ca-certificates.crt "$base/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$base/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$base/etc/group"
printf 'hosts: files dns\n' >"$base/etc/nsswitch.conf"
chown 65532:65532 "$base/home/nonroot"
base_tag=localhost/cluster-operators-base:$arch
ctr=$("${buildah[@]}" from scratch)
"${buildah[@]}" copy --quiet "$ctr" "$base" / >/dev/null
"${buildah[@]}" config --user 65532:65532 --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "$ctr"
"${buildah[@]}" commit --quiet --rm "$ctr" "$base_tag" >/dev/null

# 2. The stripped binary.
mkdir -p "$ctx/dist/$arch"
strip --strip-all -o "$ctx/dist/$arch/$op" "$bin"

# 3. The image.
tag=localhost/$op:$version
"${buildah[@]}" build --quiet --pull=never --layers=false \
  --build-arg BASE_IMAGE="$base_tag" --build-arg TARGETARCH="$arch" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -f "$containerfile" -t "$tag" "$ctx" >/dev/null

# 4. The OCI layout and its size: the layers' uncompressed bytes.
rm -rf "$out/$op.oci"
"${buildah[@]}" push --quiet "$tag" "oci:$out/$op.oci" >/dev/null
size=$(python3 - "$out/$op.oci" <<'PY'
import gzip, json, os, sys
d = sys.argv[1]
blob = lambda digest: os.path.join(d, "blobs", *digest.split(":"))
idx = json.load(open(os.path.join(d, "index.json")))
man = json.load(open(blob(idx["manifests"][0]["digest"])))
total = 0
for layer in man["layers"]:
    opener = gzip.open if layer["mediaType"].endswith("+gzip") else open
    with opener(blob(layer["digest"]), "rb") as f:
        while chunk := f.read(1 << 20):
            total += len(chunk)
print(total)
PY
)
echo "$tag: $(numfmt --to=iec-i --suffix=B "$size") uncompressed ($size bytes), binary $(stat -c %s "$ctx/dist/$arch/$op") bytes stripped, OCI layout $out/$op.oci"
echo "$size" >"$out/$op.size"
