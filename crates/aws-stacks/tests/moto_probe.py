#!/usr/bin/env python3
"""Creates the six rendered stacks of one cluster in a local moto server and checks, through
the EC2 / ELB / AutoScaling / IAM / Route53 APIs, that what the templates describe exists.

Not part of `cargo test`: moto is a fake, and this is a manual check that the templates stay
inside what it supports. Usage (from the workspace root):

    AWS_STACKS_RENDER_DIR=/tmp/stacks CFN_LINT=.venv/bin/cfn-lint \
        cargo test -p aws-stacks --test cfn_lint
    .venv/bin/python crates/aws-stacks/tests/moto_probe.py /tmp/stacks [shape]

`shape` defaults to `3az-3master-r53` (see `SHAPES` in `fixture_clusters/mod.rs`). The templates were
rendered with placeholder IDs for what other stacks produce; the script replaces them with the
real IDs from the outputs of the stacks it created before, in creation order, all in one
account (moto accepts a same-account peering). It starts its own moto server on a free port on
127.0.0.1 and stops it at the end.

Shapes with AWS-CNI (`*-cni*`) cannot be created: moto 5.2.5 ignores `AWS::EC2::VPCCidrBlock`,
so the aws-cni subnets in the pod CIDR are rejected with `InvalidSubnet.Range` while the stack is
stuck in CREATE_IN_PROGRESS. (The node-pool CIDRs are associated through the EC2 API below for
the same reason.)
"""

import json
import os
import socket
import subprocess
import sys
import time

import boto3

REGION = "eu-central-1"
ACCOUNT = "123456789012"
CLUSTER = "al9qy"
POOLS = ["g3j50", "x7k2p"]
POOL_CIDRS = ["10.1.1.0/24", "10.1.2.0/24"]
AZS = ["eu-central-1a", "eu-central-1b", "eu-central-1c"]

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto():
    port = free_port()
    server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("moto_server did not start")


def main():
    render_dir = sys.argv[1]
    shape = sys.argv[2] if len(sys.argv) > 2 else "3az-3master-r53"
    proc, url = start_moto()
    try:
        run(render_dir, shape, url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(f"\n{len(failures)} failed")
    sys.exit(1 if failures else 0)


def run(render_dir, shape, url):
    kw = dict(endpoint_url=url, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    cfn = boto3.client("cloudformation", **kw)
    ec2 = boto3.client("ec2", **kw)
    elb = boto3.client("elb", **kw)
    asg = boto3.client("autoscaling", **kw)
    iam = boto3.client("iam", **kw)
    r53 = boto3.client("route53", **kw)

    def template(stack):
        with open(os.path.join(render_dir, f"{shape}-{stack}.json")) as f:
            return f.read()

    def create(stack_name, body, subs, capabilities=("CAPABILITY_NAMED_IAM",)):
        for placeholder, real in subs.items():
            body = body.replace(placeholder, real)
        cfn.create_stack(
            StackName=stack_name,
            TemplateBody=body,
            Capabilities=list(capabilities),
            EnableTerminationProtection=True,
            Tags=[{"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"}],
        )
        s = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
        expected = set(json.loads(body).get("Outputs", {}))
        got = {o["OutputKey"]: o["OutputValue"] for o in s.get("Outputs", [])}
        check(s["StackStatus"] == "CREATE_COMPLETE", f"{stack_name}: {s['StackStatus']}")
        check(expected == set(got), f"{stack_name}: outputs {sorted(got)} (missing {sorted(expected - set(got))})")
        bad = {k: v for k, v in got.items() if "Fn::" in v or "{'" in v}
        check(not bad, f"{stack_name}: outputs resolved (unresolved: {bad})")
        return got

    # The management cluster's VPC and route tables, as the operator would find them.
    cp_vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    cp_rtbs = [ec2.create_route_table(VpcId=cp_vpc)["RouteTable"]["RouteTableId"] for _ in range(2)]

    out = create(f"cluster-{CLUSTER}-tccpi", template("tccpi"), {})
    peer_role = out["PeerRoleARN"]

    tccp = create(
        f"cluster-{CLUSTER}-tccp",
        template("tccp"),
        {
            "vpc-0123456789abcdef0": cp_vpc,
            "000111222333": ACCOUNT,
            f"arn:aws:iam::{ACCOUNT}:role/{CLUSTER}-vpc-peer-access": peer_role,
        },
    )
    azs = tccp["AvailabilityZones"].split(",")
    suffix = lambda az: "".join(p.capitalize() for p in az.split("-"))  # noqa: E731
    vpc = tccp["VPCID"]
    pcx = tccp["VPCPeeringConnectionID"]

    create(
        f"cluster-{CLUSTER}-tccpf",
        template("tccpf"),
        {"pcx-0123456789abcdef0": pcx, "rtb-0a1b2c3d4e5f60718": cp_rtbs[0], "rtb-0e4f5a6b7c8d90a1b": cp_rtbs[1]},
    )

    subs = {
        "sg-0aaaaaaaaaaaaaaa1": tccp["MasterSecurityGroupID"],
        "sg-0aaaaaaaaaaaaaaa2": tccp["APIInternalELBSecurityGroupID"],
        "sg-0aaaaaaaaaaaaaaa3": tccp["AWSCNISecurityGroupID"],
        "pcx-0123456789abcdef0": pcx,
        "vpc-0cccccccccccccccc": vpc,
        "Z0PUBLIC": tccp.get("HostedZoneID", "Z0PUBLIC"),
        "Z0PRIVATE": tccp.get("InternalHostedZoneID", "Z0PRIVATE"),
    }
    for i, az in enumerate(azs):
        subs[f"subnet-0aaaaaaaaaaaaaaa{i}"] = tccp[f"PrivateSubnetID{suffix(az)}"]
        subs[f"nat-0ddddddddddddddd{i}"] = tccp[f"NATGatewayID{suffix(az)}"]
    create(f"cluster-{CLUSTER}-tccpn", template("tccpn"), subs)

    # moto 5.2.5 ignores AWS::EC2::VPCCidrBlock: associate the pool blocks through the API so the
    # pools' subnets fit in the VPC.
    for cidr in POOL_CIDRS:
        ec2.associate_vpc_cidr_block(VpcId=vpc, CidrBlock=cidr)

    pool_sgs = {}
    for k, md in enumerate(POOLS):
        other = f"sg-0bbbbbbbbbbbbbbb{1 - k}"
        # The first pool's peer does not exist yet; any existing group stands in for it.
        pool_subs = dict(subs, **{other: pool_sgs.get(POOLS[1 - k], tccp["AWSCNISecurityGroupID"])})
        got = create(f"cluster-{CLUSTER}-tcnp-{md}", template(f"tcnp-{md}"), pool_subs)
        pool_sgs[md] = got.get("SecurityGroupID", "")
        create(
            f"cluster-{CLUSTER}-tcnpf-{md}",
            template(f"tcnpf-{md}"),
            {"pcx-0123456789abcdef0": pcx, "rtb-0a1b2c3d4e5f60718": cp_rtbs[0], "rtb-0e4f5a6b7c8d90a1b": cp_rtbs[1]},
            capabilities=(),
        )

    # --- what exists, seen through the services' own APIs ---
    v = ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"][0]
    blocks = sorted(b["CidrBlock"] for b in v["CidrBlockAssociationSet"])
    check(v["CidrBlock"] == "10.1.0.0/24", f"VPC {vpc} cidr {v['CidrBlock']}, blocks {blocks}")
    subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
    check(len(subnets) == 2 * len(azs) + len(POOLS) * len(azs), f"{len(subnets)} subnets in the tenant VPC")
    by_cidr = {s["CidrBlock"]: s["AvailabilityZone"] for s in subnets}
    check(by_cidr.get("10.1.0.32/27") == "eu-central-1a", "§14.2: private 10.1.0.32/27 in eu-central-1a")
    nats = ec2.describe_nat_gateways(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["NatGateways"]
    check(len(nats) == len(azs), f"{len(nats)} NAT gateways")
    sgs = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"]
    sg_names = sorted(t["Value"] for g in sgs for t in g.get("Tags", []) if t["Key"] == "Name")
    for name in ["master", "etcd-elb", "internal-api", "aws-cni", "worker"]:
        check(f"{CLUSTER}-{name}" in sg_names, f"security group {CLUSTER}-{name}")
    rtbs = ec2.describe_route_tables(Filters=[{"Name": "route-table-id", "Values": cp_rtbs}])["RouteTables"]
    peering_routes = [r for t in rtbs for r in t["Routes"] if r.get("VpcPeeringConnectionId") == pcx]
    check(
        len(peering_routes) == 2 * len(azs) + 2 * len(POOLS) * len(azs),
        f"{len(peering_routes)} peering routes in the management route tables",
    )
    lbs = sorted(d["LoadBalancerName"] for d in elb.describe_load_balancers()["LoadBalancerDescriptions"])
    check(lbs == sorted([f"{CLUSTER}-api", f"{CLUSTER}-api-internal", f"{CLUSTER}-etcd"]), f"classic ELBs {lbs}")
    groups = asg.describe_auto_scaling_groups()["AutoScalingGroups"]
    masters = [g for g in groups if any(t["Key"] == "giantswarm.io/stack" and t["Value"] == "tccpn" for t in g["Tags"])]
    workers = [g for g in groups if any(t["Key"] == "giantswarm.io/stack" and t["Value"] == "tcnp" for t in g["Tags"])]
    check(len(masters) == int(json.loads(template("tccpn"))["Outputs"]["MasterReplicas"]["Value"]), f"{len(masters)} master ASGs")
    check(len(workers) == len(POOLS), f"{len(workers)} node-pool ASGs")
    for g in groups:
        print(f"     {g['AutoScalingGroupName']}: desired {g['DesiredCapacity']}, {len(g['Instances'])} instances")
    # moto truncates fractional on-demand/spot splits of a MixedInstancesPolicy with overrides
    # (desired 4, base 1, 50 % above base launches 3), so only "launched something" is checked.
    check(all(g["Instances"] for g in groups), "ASGs launched instances")
    check(
        all(sorted(g["LoadBalancerNames"]) == lbs for g in masters),
        "master ASGs are attached to the three ELBs",
    )
    lts = sorted(t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"])
    check(f"{CLUSTER}-master1-launch-template" in lts or f"{CLUSTER}-master0-launch-template" in lts, f"launch templates {lts}")
    check(all(f"{CLUSTER}-{md}-LaunchTemplate" in lts for md in POOLS), "node-pool launch templates")
    roles = sorted(r["RoleName"] for r in iam.list_roles()["Roles"])
    for role in [f"{CLUSTER}-vpc-peer-access", f"gs-cluster-{CLUSTER}-role-tccpn"] + [
        f"gs-cluster-{CLUSTER}-role-{md}" for md in POOLS
    ]:
        check(role in roles, f"IAM role {role}")
    profiles = sorted(p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"])
    check(f"gs-cluster-{CLUSTER}-profile-tccpn" in profiles, f"instance profiles {profiles}")
    if "HostedZoneID" in tccp:
        zones = r53.list_hosted_zones()["HostedZones"]
        check(len(zones) == 2, f"{len(zones)} hosted zones")
        records = r53.list_resource_record_sets(HostedZoneId=tccp["InternalHostedZoneID"])["ResourceRecordSets"]
        names = sorted(r["Name"] for r in records if r["Type"] in ("A", "CNAME"))
        print("     internal zone records:", names)
        check(any(n.startswith("etcd1.") or n.startswith("etcd0.") for n in names), "etcd<n> record in the internal zone")
    # moto ignores the resource Tags of ENIs and volumes created by CloudFormation (only stack
    # tags land), so they are found by CloudFormation's logical-id tag instead of `Name`.
    logical = lambda prefix: [  # noqa: E731
        t["Value"]
        for x in ec2.describe_network_interfaces()["NetworkInterfaces"] + ec2.describe_volumes()["Volumes"]
        for t in x.get("TagSet", x.get("Tags")) or []
        if t["Key"] == "aws:cloudformation:logical-id" and t["Value"].startswith(prefix)
    ]
    check(len(logical("MasterEni")) == len(masters), f"master ENIs {sorted(logical('MasterEni'))}")
    check(len(logical("EtcdVolume")) == len(masters), f"etcd volumes {sorted(logical('EtcdVolume'))}")
    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["VpcEndpoints"]
    check(len(endpoints) == 1 + len(POOLS), f"{len(endpoints)} S3 endpoints")


if __name__ == "__main__":
    main()
