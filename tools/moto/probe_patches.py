#!/usr/bin/env python3
"""Demonstrates each correction of ``tools/moto/server.py`` against a running server.

Usage::

    python tools/moto/probe_patches.py PORT

Exits 0 when every correction behaves like AWS, 1 (listing the failures) otherwise. Each probe
works in accounts of its own, chosen at random, so it can run against a shared server. The
lifecycle-hook and rolling-update probes set the server's emulation settings
(``/moto-api/emulation``: time scale, group deletion hooks) for their duration and restore them
after; they wait for timeouts and pauses of 3 to 20 seconds,
with at least 3 seconds of margin on either side of each deadline they check.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import urllib.error
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "eu-central-1"


def client(port: int, service: str, account: str, region: str = REGION) -> Any:
    """A boto3 client that acts in ``account`` through moto's ``x-moto-account-id`` header."""
    c = boto3.client(
        service,
        region_name=region,
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="AKIAPROBE",
        aws_secret_access_key="probe",
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
    )

    def add_account(request: Any, **_: Any) -> None:
        request.headers["x-moto-account-id"] = account

    c.meta.events.register("before-sign.*.*", add_account)
    return c


def account() -> str:
    return str(random.randint(200_000_000_000, 999_999_999_999))


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code"))


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def probe_termination_protection(port: int) -> None:
    cfn = client(port, "cloudformation", account())
    name = "probe-protected"
    template = {
        "Resources": {"Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.9.0.0/16"}}}
    }
    stack_id = cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))["StackId"]

    out = cfn.update_termination_protection(StackName=name, EnableTerminationProtection=True)
    check(out["StackId"] == stack_id, f"UpdateTerminationProtection returned {out.get('StackId')}")
    described = cfn.describe_stacks(StackName=name)["Stacks"][0]
    check(described.get("EnableTerminationProtection") is True, "flag not reported as enabled")

    try:
        cfn.delete_stack(StackName=name)
        raise AssertionError("DeleteStack deleted a protected stack")
    except ClientError as err:
        message = err.response["Error"]["Message"]
        check(error_code(err) == "ValidationError", f"unexpected error code {error_code(err)}")
        check(
            message == f"Stack [{name}] cannot be deleted while TerminationProtection is enabled",
            f"unexpected message {message!r}",
        )
        check(err.response["ResponseMetadata"]["HTTPStatusCode"] == 400, "status is not 400")
    check(cfn.describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE",
          "protected stack changed state")

    cfn.update_termination_protection(StackName=stack_id, EnableTerminationProtection=False)
    cfn.delete_stack(StackName=name)
    try:
        cfn.describe_stacks(StackName=name)
        raise AssertionError("unprotected stack survived DeleteStack")
    except ClientError as err:
        check(error_code(err) == "ValidationError", f"unexpected error {error_code(err)}")

    try:
        cfn.update_termination_protection(StackName="probe-missing", EnableTerminationProtection=True)
        raise AssertionError("UpdateTerminationProtection accepted a missing stack")
    except ClientError as err:
        check(error_code(err) == "ValidationError", f"unexpected error {error_code(err)}")


def probe_cross_account_peering(port: int) -> None:
    control_plane, tenant = account(), account()
    peer_region = "eu-west-1"
    cp_ec2 = client(port, "ec2", control_plane, peer_region)
    cp_vpc = cp_ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]

    template = {
        "Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.2.0.0/16"}},
            "Peering": {
                "Type": "AWS::EC2::VPCPeeringConnection",
                "Properties": {
                    "VpcId": {"Ref": "Vpc"},
                    "PeerVpcId": cp_vpc,
                    "PeerOwnerId": control_plane,
                    "PeerRegion": peer_region,
                    "PeerRoleArn": f"arn:aws:iam::{control_plane}:role/probe-vpc-peer-access",
                    "Tags": [{"Key": "Name", "Value": "probe"}],
                },
            },
        },
        "Outputs": {"Peering": {"Value": {"Ref": "Peering"}}},
    }
    cfn = client(port, "cloudformation", tenant)
    cfn.create_stack(StackName="probe-peering", TemplateBody=json.dumps(template))
    stack = cfn.describe_stacks(StackName="probe-peering")["Stacks"][0]
    check(stack["StackStatus"] == "CREATE_COMPLETE", f"stack is {stack['StackStatus']}")
    pcx_id = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}.get("Peering")
    check(bool(pcx_id) and pcx_id.startswith("pcx-"), f"no peering id in outputs: {pcx_id!r}")

    pcx = client(port, "ec2", tenant).describe_vpc_peering_connections(
        VpcPeeringConnectionIds=[pcx_id]
    )["VpcPeeringConnections"][0]
    accepter = pcx["AccepterVpcInfo"]
    check(accepter["VpcId"] == cp_vpc, f"accepter VPC {accepter['VpcId']} != {cp_vpc}")
    check(accepter["OwnerId"] == control_plane, f"accepter owner {accepter['OwnerId']}")
    check(accepter.get("Region") == peer_region, f"accepter region {accepter.get('Region')}")
    check(pcx["Status"]["Code"] == "active", f"status {pcx['Status']['Code']}")
    check({"Key": "Name", "Value": "probe"} in pcx.get("Tags", []), f"tags {pcx.get('Tags')}")

    seen_by_cp = cp_ec2.describe_vpc_peering_connections()["VpcPeeringConnections"]
    check(any(p["VpcPeeringConnectionId"] == pcx_id for p in seen_by_cp),
          "the peer account does not see the peering")


def probe_conditional_bucket_policy(port: int) -> None:
    s3 = client(port, "s3", account())
    bucket = f"probe-tls-only-{random.randint(0, 10**9)}"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    tls_only = {
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }],
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(tls_only))
    s3.put_object(Bucket=bucket, Key="node-config", Body=b"{}")
    body = s3.get_object(Bucket=bucket, Key="node-config")["Body"].read()
    check(body == b"{}", f"read back {body!r}")

    # Unconditional statements still apply: the correction is about conditions only.
    deny_get = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{bucket}/*",
        }],
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(deny_get))
    try:
        s3.get_object(Bucket=bucket, Key="node-config")
        raise AssertionError("an unconditional Deny was not applied")
    except ClientError as err:
        status = err.response["ResponseMetadata"]["HTTPStatusCode"]
        check(status == 403, f"unconditional Deny gave {status}")


def probe_sse_kms_required_by_bucket_policy(port: int) -> None:
    """AWS refuses a PutObject that a bucket policy denies for lack of SSE-KMS headers (Amazon S3
    User Guide, "Bucket policy examples", requiring SSE-KMS for objects written to a bucket), and
    accepts the same upload with them."""
    tenant = account()
    s3 = client(port, "s3", tenant)
    kms = client(port, "kms", tenant)
    key = kms.create_key()["KeyMetadata"]["Arn"]
    bucket = f"probe-sse-kms-{random.randint(0, 10**9)}"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
             "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
             "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
            {"Sid": "DenyUnencryptedUploads", "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
             "Resource": f"arn:aws:s3:::{bucket}/*",
             "Condition": {"StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"}}},
            {"Sid": "DenyOtherKeys", "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
             "Resource": f"arn:aws:s3:::{bucket}/*",
             "Condition": {"StringNotEquals": {"s3:x-amz-server-side-encryption-aws-kms-key-id": key}}},
        ],
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    for name, extra in [
        ("no encryption header", {}),
        ("SSE-S3", {"ServerSideEncryption": "AES256"}),
        ("SSE-KMS with the AWS managed key", {"ServerSideEncryption": "aws:kms"}),
    ]:
        try:
            s3.put_object(Bucket=bucket, Key="node-config", Body=b"{}", **extra)
            raise AssertionError(f"an upload with {name} was accepted")
        except ClientError as err:
            status = err.response["ResponseMetadata"]["HTTPStatusCode"]
            check(status == 403, f"an upload with {name} gave {status}")
    s3.put_object(Bucket=bucket, Key="node-config", Body=b"{}", ServerSideEncryption="aws:kms", SSEKMSKeyId=key)
    head = s3.head_object(Bucket=bucket, Key="node-config")
    check(head.get("ServerSideEncryption") == "aws:kms", f"stored with {head.get('ServerSideEncryption')}")
    body = s3.get_object(Bucket=bucket, Key="node-config")["Body"].read()
    check(body == b"{}", f"read back {body!r}")


def probe_vpc_cidr_block(port: int) -> None:
    tenant = account()
    ec2 = client(port, "ec2", tenant)
    cfn = client(port, "cloudformation", tenant)
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/24")["Vpc"]["VpcId"]

    def associated() -> dict[str, str]:
        blocks = ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"][0].get("CidrBlockAssociationSet", [])
        return {
            b["CidrBlock"]: b["AssociationId"]
            for b in blocks
            if b["CidrBlockState"]["State"] == "associated"
        }

    def local_routes() -> list[str]:
        tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc]}])
        return sorted(
            r["DestinationCidrBlock"]
            for t in tables["RouteTables"]
            for r in t["Routes"]
            if r.get("GatewayId") == "local" and "DestinationCidrBlock" in r
        )

    # A node pool adds its CIDR as a secondary block and puts its subnets in it.
    template = {
        "Resources": {
            "PoolCidr": {
                "Type": "AWS::EC2::VPCCidrBlock",
                "Properties": {"VpcId": vpc, "CidrBlock": "10.1.4.0/22"},
            },
            **{
                f"Subnet{az.upper()}": {
                    "Type": "AWS::EC2::Subnet",
                    "DependsOn": "PoolCidr",
                    "Properties": {
                        "VpcId": vpc,
                        "CidrBlock": cidr,
                        "AvailabilityZone": f"{REGION}{az}",
                    },
                }
                for az, cidr in (("a", "10.1.4.0/24"), ("b", "10.1.5.0/24"))
            },
        },
        "Outputs": {
            "Ref": {"Value": {"Ref": "PoolCidr"}},
            "Id": {"Value": {"Fn::GetAtt": ["PoolCidr", "Id"]}},
        },
    }
    cfn.create_stack(StackName="probe-pool-cidr", TemplateBody=json.dumps(template))
    stack = cfn.describe_stacks(StackName="probe-pool-cidr")["Stacks"][0]
    check(stack["StackStatus"] == "CREATE_COMPLETE", f"stack is {stack['StackStatus']}")

    blocks = associated()
    check("10.1.4.0/22" in blocks, f"pool CIDR not associated: {blocks}")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    check(outputs.get("Ref") == blocks.get("10.1.4.0/22"), f"Ref is {outputs.get('Ref')!r}")
    check(outputs.get("Id") == blocks.get("10.1.4.0/22"), f"GetAtt Id is {outputs.get('Id')!r}")
    check(local_routes() == ["10.1.0.0/24", "10.1.4.0/22"], f"local routes {local_routes()}")
    subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
    check(sorted(s["CidrBlock"] for s in subnets) == ["10.1.4.0/24", "10.1.5.0/24"],
          f"subnets {[s['CidrBlock'] for s in subnets]}")

    cfn.delete_stack(StackName="probe-pool-cidr")
    check(set(associated()) == {"10.1.0.0/24"}, f"blocks after delete: {associated()}")
    check(local_routes() == ["10.1.0.0/24"], f"local routes after delete {local_routes()}")
    check(not ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"],
          "pool subnets survived the delete")
    try:
        ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.6.0/24")
        raise AssertionError("a subnet in the disassociated block was accepted")
    except ClientError as err:
        check(error_code(err) == "InvalidSubnet.Range", f"unexpected error {error_code(err)}")


def tccp_like_template(elb_name: str) -> dict[str, Any]:
    """The network of a control-plane stack: VPC, internet gateway, public and private subnets
    with their route tables and routes, NAT gateway with its address, S3 gateway endpoint,
    security groups and a classic load balancer."""
    vpc = {"Ref": "Vpc"}
    return {"Resources": {
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.5.0.0/16"}},
        "Igw": {"Type": "AWS::EC2::InternetGateway", "Properties": {}},
        "IgwAttachment": {"Type": "AWS::EC2::VPCGatewayAttachment",
                          "Properties": {"VpcId": vpc, "InternetGatewayId": {"Ref": "Igw"}}},
        "PublicSubnet": {"Type": "AWS::EC2::Subnet", "Properties": {
            "VpcId": vpc, "CidrBlock": "10.5.0.0/24", "AvailabilityZone": f"{REGION}a"}},
        "PrivateSubnet": {"Type": "AWS::EC2::Subnet", "Properties": {
            "VpcId": vpc, "CidrBlock": "10.5.1.0/24", "AvailabilityZone": f"{REGION}a"}},
        "PublicRouteTable": {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": vpc}},
        "PrivateRouteTable": {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": vpc}},
        "PublicRoute": {"Type": "AWS::EC2::Route", "DependsOn": "IgwAttachment", "Properties": {
            "RouteTableId": {"Ref": "PublicRouteTable"}, "DestinationCidrBlock": "0.0.0.0/0",
            "GatewayId": {"Ref": "Igw"}}},
        "PublicAssociation": {"Type": "AWS::EC2::SubnetRouteTableAssociation", "Properties": {
            "RouteTableId": {"Ref": "PublicRouteTable"}, "SubnetId": {"Ref": "PublicSubnet"}}},
        "PrivateAssociation": {"Type": "AWS::EC2::SubnetRouteTableAssociation", "Properties": {
            "RouteTableId": {"Ref": "PrivateRouteTable"}, "SubnetId": {"Ref": "PrivateSubnet"}}},
        "NatEip": {"Type": "AWS::EC2::EIP", "Properties": {"Domain": "vpc"}},
        "NatGateway": {"Type": "AWS::EC2::NatGateway", "Properties": {
            "AllocationId": {"Fn::GetAtt": ["NatEip", "AllocationId"]},
            "SubnetId": {"Ref": "PublicSubnet"}}},
        "PrivateRoute": {"Type": "AWS::EC2::Route", "Properties": {
            "RouteTableId": {"Ref": "PrivateRouteTable"}, "DestinationCidrBlock": "0.0.0.0/0",
            "NatGatewayId": {"Ref": "NatGateway"}}},
        "S3Endpoint": {"Type": "AWS::EC2::VPCEndpoint", "Properties": {
            "VpcId": vpc, "ServiceName": f"com.amazonaws.{REGION}.s3", "VpcEndpointType": "Gateway",
            "RouteTableIds": [{"Ref": "PrivateRouteTable"}, {"Ref": "PublicRouteTable"}]}},
        "MasterSecurityGroup": {"Type": "AWS::EC2::SecurityGroup", "Properties": {
            "GroupDescription": "master", "VpcId": vpc, "SecurityGroupIngress": [
                {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "0.0.0.0/0"}]}},
        "ElbSecurityGroup": {"Type": "AWS::EC2::SecurityGroup", "Properties": {
            "GroupDescription": "api load balancer", "VpcId": vpc}},
        "EtcdIngress": {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {
            "GroupId": {"Ref": "MasterSecurityGroup"}, "IpProtocol": "tcp", "FromPort": 2379,
            "ToPort": 2379, "SourceSecurityGroupId": {"Ref": "ElbSecurityGroup"}}},
        "ApiLoadBalancer": {"Type": "AWS::ElasticLoadBalancing::LoadBalancer", "Properties": {
            "LoadBalancerName": elb_name, "Scheme": "internet-facing",
            "Subnets": [{"Ref": "PublicSubnet"}], "SecurityGroups": [{"Ref": "ElbSecurityGroup"}],
            "Listeners": [{"LoadBalancerPort": "443", "InstancePort": "443", "Protocol": "TCP"}]}},
    }}


def probe_network_stack_delete(port: int) -> None:
    tenant = account()
    ec2 = client(port, "ec2", tenant)
    cfn = client(port, "cloudformation", tenant)
    elb = client(port, "elb", tenant)
    elb_name = f"probe-api-{random.randint(0, 10**6)}"
    cfn.create_stack(StackName="probe-tccp", TemplateBody=json.dumps(tccp_like_template(elb_name)))
    stack = cfn.describe_stacks(StackName="probe-tccp")["Stacks"][0]
    check(stack["StackStatus"] == "CREATE_COMPLETE", f"stack is {stack['StackStatus']}")
    ids = {
        r["LogicalResourceId"]: r.get("PhysicalResourceId")
        for r in cfn.describe_stack_resources(StackName="probe-tccp")["StackResources"]
        if "LogicalResourceId" in r
    }
    vpc, igw, nat, vpce = ids["Vpc"], ids["Igw"], ids["NatGateway"], ids["S3Endpoint"]
    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc]}])
    check(len(tables["RouteTables"]) == 3, f"{len(tables['RouteTables'])} route tables")

    cfn.delete_stack(StackName="probe-tccp")  # raised DependencyViolation before
    try:
        cfn.describe_stacks(StackName="probe-tccp")
        raise AssertionError("the stack survived DeleteStack")
    except ClientError as err:
        check(error_code(err) == "ValidationError", f"unexpected error {error_code(err)}")

    check(not ec2.describe_vpcs(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Vpcs"],
          "the VPC survived the stack delete")
    in_vpc = [{"Name": "vpc-id", "Values": [vpc]}]
    check(not ec2.describe_route_tables(Filters=in_vpc)["RouteTables"],
          "route tables survived the stack delete")
    igws = ec2.describe_internet_gateways()["InternetGateways"]
    check(all(g["InternetGatewayId"] != igw for g in igws), "the internet gateway survived")
    nats = ec2.describe_nat_gateways()["NatGateways"]
    check(all(n["State"] == "deleted" for n in nats if n["NatGatewayId"] == nat),
          f"NAT gateway states {[n['State'] for n in nats]}")
    check(not ec2.describe_addresses()["Addresses"], "the NAT address was not released")
    endpoints = ec2.describe_vpc_endpoints()["VpcEndpoints"]
    check(all(e["State"].lower() == "deleted" for e in endpoints if e["VpcEndpointId"] == vpce),
          f"endpoint states {[e['State'] for e in endpoints]}")
    groups = ec2.describe_security_groups()["SecurityGroups"]
    check(all(g.get("VpcId") != vpc for g in groups), "security groups survived")
    lbs = elb.describe_load_balancers()["LoadBalancerDescriptions"]
    check(all(lb["LoadBalancerName"] != elb_name for lb in lbs), "the load balancer survived")


def probe_describe_during_create(port: int) -> None:
    """DescribeStacks while CreateStack runs must not create a second copy of a resource that an
    output references. Racy by nature: plain moto duplicates some groups on most runs."""
    tenant = account()
    cfn = client(port, "cloudformation", tenant)
    autoscaling = client(port, "autoscaling", tenant)
    groups = 12
    template: dict[str, Any] = {
        "Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.9.0.0/24"}},
            "Subnet": {
                "Type": "AWS::EC2::Subnet",
                "Properties": {
                    "VpcId": {"Ref": "Vpc"},
                    "CidrBlock": "10.9.0.0/26",
                    "AvailabilityZone": f"{REGION}a",
                },
            },
            "LaunchTemplate": {
                "Type": "AWS::EC2::LaunchTemplate",
                "Properties": {"LaunchTemplateData": {"ImageId": "ami-12c6146b", "InstanceType": "m5.large"}},
            },
            **{
                f"Group{n}": {
                    "Type": "AWS::AutoScaling::AutoScalingGroup",
                    "Properties": {
                        "MinSize": "1",
                        "MaxSize": "2",
                        "DesiredCapacity": "1",
                        "VPCZoneIdentifier": [{"Ref": "Subnet"}],
                        "LaunchTemplate": {
                            "LaunchTemplateId": {"Ref": "LaunchTemplate"},
                            "Version": {"Fn::GetAtt": ["LaunchTemplate", "LatestVersionNumber"]},
                        },
                    },
                }
                for n in range(groups)
            },
        },
        "Outputs": {f"Group{n}": {"Value": {"Ref": f"Group{n}"}} for n in range(groups)},
    }
    done = threading.Event()

    def describe() -> None:
        reader = client(port, "cloudformation", tenant)
        while not done.is_set():
            try:
                reader.describe_stacks(StackName="probe-outputs")
            except ClientError:
                pass

    readers = [threading.Thread(target=describe) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        cfn.create_stack(StackName="probe-outputs", TemplateBody=json.dumps(template))
    finally:
        done.set()
        for t in readers:
            t.join()
    names = [
        g["AutoScalingGroupName"]
        for page in autoscaling.get_paginator("describe_auto_scaling_groups").paginate()
        for g in page["AutoScalingGroups"]
    ]
    check(len(names) == groups, f"{len(names)} Auto Scaling groups for {groups} in the template")


def probe_request_log(port: int) -> None:
    """Every request is logged with its caller; keys issued by AssumeRole trace back to the key
    that assumed the role, and the Query action is read from the body without losing it."""
    import urllib.request

    tenant = account()
    role = f"arn:aws:iam::{tenant}:role/probe"
    sts = boto3.client(
        "sts", region_name=REGION, endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="AKIAPROBELOG", aws_secret_access_key="probe",
    )
    creds = sts.assume_role(RoleArn=role, RoleSessionName="probe")["Credentials"]
    ec2 = boto3.client(
        "ec2", region_name=REGION, endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )
    before = time.time()
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    check(vpc.startswith("vpc-"), f"CreateVpc answered {vpc!r}: the body reached moto intact")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/request-log") as answer:
        log = json.loads(answer.read())
    mine = [e for e in log if e["key"] == creds["AccessKeyId"]]
    check([e["action"] for e in mine] == ["CreateVpc"], f"entries of the assumed key: {mine}")
    entry = mine[0]
    check(entry["principal"] == "AKIAPROBELOG", f"principal {entry['principal']!r}")
    check(entry["service"] == "ec2" and entry["method"] == "POST", f"entry {entry}")
    check(before - 1 <= entry["time"] <= time.time(), f"time {entry['time']} not within the call")
    assumed = [e for e in log if e["key"] == "AKIAPROBELOG"]
    check([e["action"] for e in assumed] == ["AssumeRole"], f"entries of the long-term key: {assumed}")


def probe_route_and_peering_delete(port: int) -> None:
    # A stack adding a peering and a route through it to a route table it does not own, as
    # TCCP and TCCPF do; created, deleted, created again.
    tenant = account()
    ec2 = client(port, "ec2", tenant)
    cfn = client(port, "cloudformation", tenant)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    peer = ec2.create_vpc(CidrBlock="10.1.0.0/24")["Vpc"]["VpcId"]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    template = json.dumps({"Resources": {
        "Peering": {"Type": "AWS::EC2::VPCPeeringConnection",
                    "Properties": {"VpcId": peer, "PeerVpcId": vpc}},
        "PeeringRoute": {"Type": "AWS::EC2::Route", "Properties": {
            "RouteTableId": table, "DestinationCidrBlock": "10.1.0.32/27",
            "VpcPeeringConnectionId": {"Ref": "Peering"}}},
    }})

    def routes() -> list[str]:
        found = ec2.describe_route_tables(RouteTableIds=[table])["RouteTables"][0]["Routes"]
        return [r.get("DestinationCidrBlock", "") for r in found]

    cfn.create_stack(StackName="probe-routes", TemplateBody=template)
    ids = {
        r["LogicalResourceId"]: r.get("PhysicalResourceId")
        for r in cfn.describe_stack_resources(StackName="probe-routes")["StackResources"]
    }
    check("10.1.0.32/27" in routes(), f"the route was not created: {routes()}")
    cfn.delete_stack(StackName="probe-routes")
    check("10.1.0.32/27" not in routes(), f"the route survived the stack delete: {routes()}")
    pcxs = ec2.describe_vpc_peering_connections(VpcPeeringConnectionIds=[ids["Peering"]])
    states = [p["Status"]["Code"] for p in pcxs["VpcPeeringConnections"]]
    check(states in ([], ["deleted"]), f"the peering survived the stack delete: {states}")
    cfn.create_stack(StackName="probe-routes", TemplateBody=template)  # RouteAlreadyExists before
    stack = cfn.describe_stacks(StackName="probe-routes")["Stacks"][0]
    check(stack["StackStatus"] == "CREATE_COMPLETE", f"re-created stack is {stack['StackStatus']}")
    check(routes().count("10.1.0.32/27") == 1, f"routes after re-creation: {routes()}")


def probe_ingress_rule_removed_by_update(port: int) -> None:
    # A stack adding a rule to a group it does not own, as a node pool's peer rule; then updated
    # without the rule, then deleted.
    tenant = account()
    ec2 = client(port, "ec2", tenant)
    cfn = client(port, "cloudformation", tenant)
    vpc = ec2.create_vpc(CidrBlock="10.3.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="probe-pool-a", Description="a", VpcId=vpc)["GroupId"]
    peer = ec2.create_security_group(GroupName="probe-pool-b", Description="b", VpcId=vpc)["GroupId"]
    rule = {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {
        "GroupId": group, "SourceSecurityGroupId": peer, "IpProtocol": "-1",
        "Description": f"All traffic from node pool security group {peer}"}}
    marker = {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": "m", "VpcId": vpc}}

    def sources() -> list[str]:
        g = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]
        return [p["GroupId"] for perm in g["IpPermissions"] for p in perm.get("UserIdGroupPairs", [])]

    cfn.create_stack(StackName="probe-rules",
                     TemplateBody=json.dumps({"Resources": {"Marker": marker, "PeerRule": rule}}))
    check(sources() == [peer], f"the rule was not created: {sources()}")
    cfn.update_stack(StackName="probe-rules", TemplateBody=json.dumps({"Resources": {"Marker": marker}}))
    check(sources() == [], f"the rule survived the update that dropped it: {sources()}")
    cfn.delete_stack(StackName="probe-rules")

    cfn.create_stack(StackName="probe-rules-2",
                     TemplateBody=json.dumps({"Resources": {"Marker": marker, "PeerRule": rule}}))
    check(sources() == [peer], f"the rule was not created: {sources()}")
    cfn.delete_stack(StackName="probe-rules-2")
    check(sources() == [], f"the rule survived the stack delete: {sources()}")


def probe_interface_and_volume_properties(port: int) -> None:
    # A master's etcd interface and volume, as TCCPN declares them: found by their Name tag,
    # with the interface's security group and the volume's type, encryption and size. They are
    # not attached by the stack, so terminating the instance that used them leaves them.
    tenant = account()
    ec2 = client(port, "ec2", tenant)
    cfn = client(port, "cloudformation", tenant)
    vpc = ec2.create_vpc(CidrBlock="10.4.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.4.0.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="probe-master", Description="m", VpcId=vpc)["GroupId"]
    template = json.dumps({"Resources": {
        "MasterEni": {"Type": "AWS::EC2::NetworkInterface", "Properties": {
            "SubnetId": subnet, "GroupSet": [group], "Description": "etcd interface",
            "Tags": [{"Key": "Name", "Value": "probe-master0-eni"}]}},
        "EtcdVolume": {"Type": "AWS::EC2::Volume", "Properties": {
            "AvailabilityZone": f"{REGION}a", "Size": 100, "VolumeType": "gp3", "Encrypted": True,
            "Iops": 4000, "Throughput": 250, "Tags": [{"Key": "Name", "Value": "probe-master0-etcd"}]}},
    }})
    cfn.create_stack(StackName="probe-etcd", TemplateBody=template)
    enis = ec2.describe_network_interfaces(
        Filters=[{"Name": "tag:Name", "Values": ["probe-master0-eni"]}])["NetworkInterfaces"]
    check(len(enis) == 1, f"the interface is not found by its Name tag: {enis}")
    groups = [g["GroupId"] for g in enis[0]["Groups"]]
    check(groups == [group], f"the interface's GroupSet was dropped: {groups}")
    volumes = ec2.describe_volumes(Filters=[{"Name": "tag:Name", "Values": ["probe-master0-etcd"]}])["Volumes"]
    check(len(volumes) == 1, f"the volume is not found by its Name tag: {volumes}")
    v = volumes[0]
    got = (v["Size"], v["VolumeType"], v["Encrypted"], v.get("Iops"), v.get("Throughput"))
    check(got == (100, "gp3", True, 4000, 250), f"the volume's properties were dropped: {got}")
    cfn.delete_stack(StackName="probe-etcd")
    left = ec2.describe_volumes(Filters=[{"Name": "tag:Name", "Values": ["probe-master0-etcd"]}])["Volumes"]
    check(left == [], f"the volume survived its stack: {left}")


def probe_tags_by_resource(port: int) -> None:
    # A resource's tags come back as DescribeTags lists them, whatever else the account holds,
    # and tag filters select exactly the tagged resources. Ids that share a prefix stay apart.
    tenant = account()
    ec2 = client(port, "ec2", tenant)
    vpc = ec2.create_vpc(CidrBlock="10.5.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.5.{i}.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
        for i in range(3)
    ]
    ec2.create_tags(Resources=[subnets[0]], Tags=[{"Key": "Name", "Value": "probe-a"}, {"Key": "role", "Value": "x"}])
    ec2.create_tags(Resources=[subnets[1]], Tags=[{"Key": "Name", "Value": "probe-b"}])
    described = {s["SubnetId"]: s.get("Tags", []) for s in ec2.describe_subnets(SubnetIds=subnets)["Subnets"]}
    for subnet in subnets:
        listed = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [subnet]}])["Tags"]
        want = sorted((t["Key"], t["Value"]) for t in listed)
        got = sorted((t["Key"], t["Value"]) for t in described[subnet])
        check(got == want, f"subnet {subnet} describes tags {got}, DescribeTags lists {want}")
    check(described[subnets[2]] == [], f"an untagged subnet has tags: {described[subnets[2]]}")
    found = ec2.describe_subnets(Filters=[{"Name": "tag:Name", "Values": ["probe-a"]}])["Subnets"]
    check([s["SubnetId"] for s in found] == [subnets[0]], f"tag:Name=probe-a selects {found}")


# --- Auto Scaling lifecycle hooks and rolling updates (corrections 11-13) --------------------------


LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"


def emulation(port: int, **settings: Any) -> dict[str, Any]:
    """The server's emulation settings (``/moto-api/emulation``), after setting ``settings``."""
    import urllib.request

    url = f"http://127.0.0.1:{port}/moto-api/emulation"
    data = json.dumps(settings).encode() if settings else None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(request) as answer:
        return dict(json.loads(answer.read()))


class scaled:
    """Runs a block with some emulation settings (a time scale, ...), restoring the previous
    ones after."""

    def __init__(self, port: int, time_scale: float, **settings: Any) -> None:
        self.port, self.settings, self.previous = port, {"time_scale": time_scale, **settings}, {}

    def __enter__(self) -> None:
        self.previous = emulation(self.port)
        emulation(self.port, **self.settings)

    def __exit__(self, *_: Any) -> None:
        emulation(self.port, **self.previous)


def eventually(what: str, probe: Callable[[], Any], timeout: float = 60.0) -> Any:
    """``probe()``'s first truthy answer, polled every 0.2 s; fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def expect_error(call: Callable[[], Any], code: str, message: str | None = None) -> None:
    try:
        call()
    except ClientError as err:
        check(error_code(err) == code, f"error {error_code(err)} ({err}), want {code}")
        check(err.response["ResponseMetadata"]["HTTPStatusCode"] == 400, f"status of {err}")
        if message is not None:
            got = err.response["Error"]["Message"]
            check(got == message, f"message {got!r}, want {message!r}")
        return
    raise AssertionError(f"no {code} error")


def group_states(autoscaling: Any, group: str) -> dict[str, str]:
    """Instance id → lifecycle state, as DescribeAutoScalingGroups reports them."""
    groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"]
    return {i["InstanceId"]: i["LifecycleState"] for i in groups[0]["Instances"]} if groups else {}


def ec2_state(ec2: Any, instance: str) -> str:
    found = ec2.describe_instances(InstanceIds=[instance])["Reservations"]
    return str(found[0]["Instances"][0]["State"]["Name"])


def network(ec2: Any) -> tuple[str, str]:
    """A subnet and a launch template for groups."""
    vpc = ec2.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.0.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    template = ec2.create_launch_template(
        LaunchTemplateName=f"probe-{random.randint(0, 10**9)}",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "m5.large"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    return subnet, template


def hook(name: str, transition: str, timeout: int = 3600, default: str = "CONTINUE") -> dict[str, Any]:
    return {"LifecycleHookName": name, "LifecycleTransition": transition, "HeartbeatTimeout": timeout,
            "DefaultResult": default}


def probe_lifecycle_hooks(port: int) -> None:
    # Hooks from CreateAutoScalingGroup's LifecycleHookSpecificationList apply to the first
    # instances; each instance waits until its action is completed.
    tenant = account()
    ec2, autoscaling = client(port, "ec2", tenant), client(port, "autoscaling", tenant)
    subnet, template = network(ec2)
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="probe-hooks", MinSize=0, MaxSize=5, DesiredCapacity=2, VPCZoneIdentifier=subnet,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        LifecycleHookSpecificationList=[hook("launch", LAUNCHING, default="ABANDON"), hook("drain", TERMINATING)],
    )
    hooks = autoscaling.describe_lifecycle_hooks(AutoScalingGroupName="probe-hooks")["LifecycleHooks"]
    check(sorted((h["LifecycleHookName"], h["LifecycleTransition"]) for h in hooks)
          == [("drain", TERMINATING), ("launch", LAUNCHING)], f"hooks {hooks}")
    check(all("NotificationTargetARN" not in h and "RoleARN" not in h and h["GlobalTimeout"] == 172800
              for h in hooks), f"hooks describe what they were not given: {hooks}")
    states = group_states(autoscaling, "probe-hooks")
    check(sorted(states.values()) == ["Pending:Wait", "Pending:Wait"], f"launched instances are {states}")
    first, second = sorted(states)
    # Capacity counts the waiting instances: the same desired capacity launches nothing more.
    autoscaling.set_desired_capacity(AutoScalingGroupName="probe-hooks", DesiredCapacity=2)
    check(len(group_states(autoscaling, "probe-hooks")) == 2, "instances in Pending:Wait were launched again")

    autoscaling.complete_lifecycle_action(AutoScalingGroupName="probe-hooks", LifecycleHookName="launch",
                                          InstanceId=first, LifecycleActionResult="CONTINUE")
    autoscaling.complete_lifecycle_action(AutoScalingGroupName="probe-hooks", LifecycleHookName="launch",
                                          InstanceId=second, LifecycleActionResult="ABANDON")
    states = group_states(autoscaling, "probe-hooks")
    check(states.get(first) == "InService", f"CONTINUE left {first} {states.get(first)}")
    check(second not in states and ec2_state(ec2, second) == "terminated", f"ABANDON left {second}: {states}")
    replacement = [i for i in states if i != first]
    check(len(replacement) == 1 and states[replacement[0]] == "Pending:Wait",
          f"no replacement for the abandoned instance: {states}")
    described = autoscaling.describe_auto_scaling_instances(InstanceIds=[first])["AutoScalingInstances"]
    check(described[0]["LifecycleState"] == "InService", f"DescribeAutoScalingInstances {described}")

    # An instance in no wait state: the error AWS gives, for both calls.
    missing = f"No active Lifecycle Action found with instance ID {first}"
    expect_error(lambda: autoscaling.complete_lifecycle_action(
        AutoScalingGroupName="probe-hooks", LifecycleHookName="launch", InstanceId=first,
        LifecycleActionResult="CONTINUE"), "ValidationError", missing)
    expect_error(lambda: autoscaling.record_lifecycle_action_heartbeat(
        AutoScalingGroupName="probe-hooks", LifecycleHookName="drain", InstanceId=first), "ValidationError", missing)
    expect_error(lambda: autoscaling.complete_lifecycle_action(
        AutoScalingGroupName="probe-hooks", LifecycleHookName="launch", LifecycleActionResult="CONTINUE",
        LifecycleActionToken="8b3ae2d2-0c4a-4fd4-b6cc-7f6ae4b1a34c"), "ValidationError",
        "No active Lifecycle Action found with token 8b3ae2d2-0c4a-4fd4-b6cc-7f6ae4b1a34c")
    expect_error(lambda: autoscaling.terminate_instance_in_auto_scaling_group(
        InstanceId="i-00000000000000000", ShouldDecrementDesiredCapacity=False), "ValidationError")

    # TerminateInstanceInAutoScalingGroup: Terminating:Wait until completed, then terminated.
    autoscaling.terminate_instance_in_auto_scaling_group(InstanceId=first, ShouldDecrementDesiredCapacity=True)
    states = group_states(autoscaling, "probe-hooks")
    check(states.get(first) == "Terminating:Wait", f"terminated instance is {states.get(first)}")
    check(ec2_state(ec2, first) == "running", "the instance stopped before its hook completed")
    described = autoscaling.describe_auto_scaling_instances(InstanceIds=[first])["AutoScalingInstances"]
    check(described[0]["LifecycleState"] == "Terminating:Wait", f"DescribeAutoScalingInstances {described}")
    autoscaling.record_lifecycle_action_heartbeat(AutoScalingGroupName="probe-hooks", LifecycleHookName="drain",
                                                  InstanceId=first)
    autoscaling.complete_lifecycle_action(AutoScalingGroupName="probe-hooks", LifecycleHookName="drain",
                                          InstanceId=first, LifecycleActionResult="CONTINUE")
    check(first not in group_states(autoscaling, "probe-hooks"), "the completed instance stayed in the group")
    check(ec2_state(ec2, first) == "terminated", f"EC2 state {ec2_state(ec2, first)}")
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["probe-hooks"])["AutoScalingGroups"][0]
    check(group["DesiredCapacity"] == 1, f"desired capacity {group['DesiredCapacity']} after a decrement")

    # Scale-in through SetDesiredCapacity waits the same way; ABANDON also lets it terminate.
    pending = replacement[0]
    autoscaling.complete_lifecycle_action(AutoScalingGroupName="probe-hooks", LifecycleHookName="launch",
                                          InstanceId=pending, LifecycleActionResult="CONTINUE")
    autoscaling.set_desired_capacity(AutoScalingGroupName="probe-hooks", DesiredCapacity=0)
    check(group_states(autoscaling, "probe-hooks") == {pending: "Terminating:Wait"},
          f"scale-in left {group_states(autoscaling, 'probe-hooks')}")
    autoscaling.complete_lifecycle_action(AutoScalingGroupName="probe-hooks", LifecycleHookName="drain",
                                          InstanceId=pending, LifecycleActionResult="ABANDON")
    check(group_states(autoscaling, "probe-hooks") == {}, "the abandoned instance stayed")
    check(ec2_state(ec2, pending) == "terminated", f"EC2 state {ec2_state(ec2, pending)}")

    # The group's hooks go with it.
    autoscaling.delete_auto_scaling_group(AutoScalingGroupName="probe-hooks", ForceDelete=True)
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="probe-hooks", MinSize=0, MaxSize=1, DesiredCapacity=1, VPCZoneIdentifier=subnet,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"})
    check(autoscaling.describe_lifecycle_hooks(AutoScalingGroupName="probe-hooks")["LifecycleHooks"] == [],
          "a deleted group's hooks apply to a new group of the same name")
    check(list(group_states(autoscaling, "probe-hooks").values()) == ["InService"], "a group without hooks waits")

    # DeleteLifecycleHook completes the hook's outstanding actions first (CONTINUE when terminating).
    autoscaling.put_lifecycle_hook(AutoScalingGroupName="probe-hooks", LifecycleHookName="drain",
                                   LifecycleTransition=TERMINATING, DefaultResult="ABANDON")
    (last,) = group_states(autoscaling, "probe-hooks")
    autoscaling.set_desired_capacity(AutoScalingGroupName="probe-hooks", DesiredCapacity=0)
    check(group_states(autoscaling, "probe-hooks") == {last: "Terminating:Wait"}, "scale-in did not wait")
    autoscaling.delete_lifecycle_hook(AutoScalingGroupName="probe-hooks", LifecycleHookName="drain")
    check(group_states(autoscaling, "probe-hooks") == {}, "deleting the hook left its instance waiting")
    check(ec2_state(ec2, last) == "terminated", f"EC2 state {ec2_state(ec2, last)}")


def probe_lifecycle_timeouts(port: int) -> None:
    # At time scale 0.1 a 120 s heartbeat timeout lasts 12 s. A heartbeat at 8 s extends the
    # wait to 20 s: at 15 s the instance still waits, then the DefaultResult applies.
    tenant = account()
    ec2, autoscaling = client(port, "ec2", tenant), client(port, "autoscaling", tenant)
    subnet, template = network(ec2)
    spec = {"LaunchTemplate": {"LaunchTemplateId": template, "Version": "$Latest"}, "VPCZoneIdentifier": subnet}
    with scaled(port, 0.1):
        autoscaling.create_auto_scaling_group(AutoScalingGroupName="probe-drain", MinSize=0, MaxSize=2,
                                              DesiredCapacity=1, **spec)
        autoscaling.put_lifecycle_hook(AutoScalingGroupName="probe-drain", LifecycleHookName="drain",
                                       LifecycleTransition=TERMINATING, HeartbeatTimeout=3600, DefaultResult="CONTINUE")
        # PutLifecycleHook on an existing hook keeps what it leaves out.
        autoscaling.put_lifecycle_hook(AutoScalingGroupName="probe-drain", LifecycleHookName="drain",
                                       HeartbeatTimeout=120)
        (drain,) = autoscaling.describe_lifecycle_hooks(AutoScalingGroupName="probe-drain")["LifecycleHooks"]
        check((drain["LifecycleTransition"], drain["HeartbeatTimeout"], drain["DefaultResult"], drain["GlobalTimeout"])
              == (TERMINATING, 120, "CONTINUE", 12000), f"hook after PutLifecycleHook: {drain}")
        (instance,) = group_states(autoscaling, "probe-drain")
        # A launching hook timing out with CONTINUE puts its instance in service (60 s → 6 s).
        autoscaling.create_auto_scaling_group(AutoScalingGroupName="probe-boot", MinSize=0, MaxSize=2,
                                              DesiredCapacity=1, LifecycleHookSpecificationList=[
                                                  hook("boot", LAUNCHING, timeout=60)], **spec)
        (booting,) = group_states(autoscaling, "probe-boot")
        started = time.monotonic()
        autoscaling.set_desired_capacity(AutoScalingGroupName="probe-drain", DesiredCapacity=0)
        check(group_states(autoscaling, "probe-drain") == {instance: "Terminating:Wait"}, "scale-in did not wait")
        check(group_states(autoscaling, "probe-boot") == {booting: "Pending:Wait"}, "launch did not wait")
        time.sleep(max(0.0, started + 8 - time.monotonic()))
        autoscaling.record_lifecycle_action_heartbeat(AutoScalingGroupName="probe-drain", LifecycleHookName="drain",
                                                      InstanceId=instance)
        time.sleep(max(0.0, started + 15 - time.monotonic()))
        check(group_states(autoscaling, "probe-drain") == {instance: "Terminating:Wait"},
              "the heartbeat did not extend the wait")
        check(group_states(autoscaling, "probe-boot") == {booting: "InService"},
              f"the launch hook's timeout did not apply CONTINUE: {group_states(autoscaling, 'probe-boot')}")
        eventually("the heartbeat timeout to terminate the instance",
                   lambda: not group_states(autoscaling, "probe-drain"), timeout=40)
        check(ec2_state(ec2, instance) == "terminated", f"EC2 state {ec2_state(ec2, instance)}")


def group_template(desired: int, instance_type: str, tags: dict[str, str], update_policy: bool,
                   max_size: int = 6, hooks: bool = True) -> str:
    """A launch template and a group using its latest version, with a terminating hook unless
    ``hooks`` is false."""
    group: dict[str, Any] = {
        "Type": "AWS::AutoScaling::AutoScalingGroup",
        "Properties": {
            "MinSize": "0", "MaxSize": str(max_size), "DesiredCapacity": str(desired),
            "VPCZoneIdentifier": [{"Ref": "Subnet"}],
            "MixedInstancesPolicy": {"LaunchTemplate": {"LaunchTemplateSpecification": {
                "LaunchTemplateId": {"Ref": "LaunchTemplate"},
                "Version": {"Fn::GetAtt": ["LaunchTemplate", "LatestVersionNumber"]}}}},
            "LifecycleHookSpecificationList": [hook("NodePool", TERMINATING)] if hooks else [],
            "Tags": [{"Key": k, "Value": v, "PropagateAtLaunch": True} for k, v in tags.items()],
        },
    }
    if update_policy:
        group["UpdatePolicy"] = {"AutoScalingRollingUpdate": {
            "MinInstancesInService": "2", "MaxBatchSize": "2", "PauseTime": "PT2M"}}
    return json.dumps({
        "Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.8.0.0/16"}},
            "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {
                "VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.8.0.0/24", "AvailabilityZone": f"{REGION}a"}},
            "LaunchTemplate": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {
                "LaunchTemplateData": {"ImageId": "ami-12c6146b", "InstanceType": instance_type}}},
            "Group": group,
        },
        "Outputs": {"Group": {"Value": {"Ref": "Group"}}},
    })


def stack_status(cfn: Any, name: str) -> str:
    return str(cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"])


def probe_group_updated_in_place(port: int) -> None:
    # A stack update changing sizes and tags keeps the group and its instances, and applies only
    # what the template changed: a capacity and a tag set through the API stay. A smaller
    # desired capacity scales in through the terminating hook.
    tenant = account()
    cfn, autoscaling, ec2 = (client(port, s, tenant) for s in ("cloudformation", "autoscaling", "ec2"))
    cfn.create_stack(StackName="probe-in-place", TemplateBody=group_template(2, "m5.large", {"pool": "a"}, True))
    stack = cfn.describe_stacks(StackName="probe-in-place")["Stacks"][0]
    name = stack["Outputs"][0]["OutputValue"]
    check(sorted(group_states(autoscaling, name).values()) == ["InService", "InService"],
          f"instances {group_states(autoscaling, name)}")
    hooks = autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=name)["LifecycleHooks"]
    check([(h["LifecycleHookName"], h["HeartbeatTimeout"], h["DefaultResult"]) for h in hooks]
          == [("NodePool", 3600, "CONTINUE")], f"hooks from the template: {hooks}")
    # An autoscaler's capacity and tag.
    autoscaling.set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=3)
    autoscaling.create_or_update_tags(Tags=[{"ResourceId": name, "ResourceType": "auto-scaling-group",
                                             "Key": "k8s.io/cluster-autoscaler/enabled", "Value": "true",
                                             "PropagateAtLaunch": False}])
    before = group_states(autoscaling, name)

    cfn.update_stack(StackName="probe-in-place",
                     TemplateBody=group_template(2, "m5.large", {"pool": "b"}, True, max_size=7))
    check(stack_status(cfn, "probe-in-place") == "UPDATE_COMPLETE", "a size change rolled the group")
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    check(len(group) == 1, f"the group {name} was replaced")
    check((group[0]["MaxSize"], group[0]["DesiredCapacity"]) == (7, 3),
          f"MaxSize {group[0]['MaxSize']} (template 7), DesiredCapacity {group[0]['DesiredCapacity']} (live 3)")
    tags = {t["Key"]: t["Value"] for t in group[0]["Tags"]}
    check(tags.get("pool") == "b" and tags.get("k8s.io/cluster-autoscaler/enabled") == "true", f"tags {tags}")
    check(group_states(autoscaling, name) == before, f"instances replaced: {group_states(autoscaling, name)}")

    cfn.update_stack(StackName="probe-in-place",
                     TemplateBody=group_template(1, "m5.large", {"pool": "b"}, True, max_size=7))
    check(stack_status(cfn, "probe-in-place") == "UPDATE_COMPLETE", "a scale-in rolled the group")
    states = group_states(autoscaling, name)
    waiting = [i for i, s in states.items() if s == "Terminating:Wait"]
    check(len(states) == 3 and len(waiting) == 2, f"scale-in from 3 to 1 by the stack: {states}")
    for instance in waiting:
        autoscaling.complete_lifecycle_action(AutoScalingGroupName=name, LifecycleHookName="NodePool",
                                              InstanceId=instance, LifecycleActionResult="CONTINUE")
    check(list(group_states(autoscaling, name).values()) == ["InService"], "the scaled-in instances stayed")
    check(all(ec2_state(ec2, i) == "terminated" for i in waiting), "a scaled-in instance still runs")

    # A hook the template no longer lists goes.
    cfn.update_stack(StackName="probe-in-place",
                     TemplateBody=group_template(1, "m5.large", {"pool": "b"}, True, max_size=7, hooks=False))
    check(autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=name)["LifecycleHooks"] == [],
          "a hook removed from the template stayed")


def probe_rolling_update(port: int) -> None:
    # A new launch template version rolls the group: batches of 2, at least 2 in service, each
    # old instance in Terminating:Wait until completed, PT2M pause (6 s at time scale 0.05),
    # the stack UPDATE_IN_PROGRESS until the end.
    tenant = account()
    cfn, autoscaling, ec2 = (client(port, s, tenant) for s in ("cloudformation", "autoscaling", "ec2"))
    with scaled(port, 0.05):
        cfn.create_stack(StackName="probe-roll", TemplateBody=group_template(3, "m5.large", {}, True))
        name = cfn.describe_stacks(StackName="probe-roll")["Stacks"][0]["Outputs"][0]["OutputValue"]
        old = set(group_states(autoscaling, name))
        check(len(old) == 3, f"instances {old}")
        cfn.update_stack(StackName="probe-roll", TemplateBody=group_template(3, "m5.xlarge", {}, True))
        check(stack_status(cfn, "probe-roll") == "UPDATE_IN_PROGRESS", "the stack did not wait for the roll")
        stack_id = cfn.describe_stacks(StackName="probe-roll")["Stacks"][0]["StackId"]
        expect_error(lambda: cfn.update_stack(StackName="probe-roll",
                                              TemplateBody=group_template(3, "m5.2xlarge", {}, True)),
                     "ValidationError", f"Stack:{stack_id} is in UPDATE_IN_PROGRESS state and can not be updated.")
        expect_error(lambda: cfn.delete_stack(StackName="probe-roll"), "ValidationError",
                     f"Stack [{stack_id}] cannot be deleted while in status UPDATE_IN_PROGRESS")
        seen_min = [99]

        def observe() -> dict[str, str]:
            states = group_states(autoscaling, name)
            seen_min[0] = min(seen_min[0], sum(1 for s in states.values() if s == "InService"))
            return states

        def old_waiting() -> list[str]:
            return sorted(i for i, s in observe().items() if i in old and s == "Terminating:Wait")

        first = eventually("the first batch to wait", old_waiting)
        check(len(first) == 2, f"first batch {first}, MaxBatchSize is 2")
        for instance in first:
            check(ec2_state(ec2, instance) == "running", "an old instance stopped before its hook completed")
            autoscaling.complete_lifecycle_action(AutoScalingGroupName=name, LifecycleHookName="NodePool",
                                                  InstanceId=instance, LifecycleActionResult="CONTINUE")
        check(stack_status(cfn, "probe-roll") == "UPDATE_IN_PROGRESS", "the stack finished with an old instance left")
        last = eventually("the last old instance to wait", lambda: [i for i in old_waiting() if i not in first])
        autoscaling.complete_lifecycle_action(AutoScalingGroupName=name, LifecycleHookName="NodePool",
                                              InstanceId=last[0], LifecycleActionResult="CONTINUE")
        eventually("the last old instance to leave", lambda: not (set(observe()) & old))
        check(stack_status(cfn, "probe-roll") == "UPDATE_IN_PROGRESS", "the stack did not pause after the batch")
        eventually("the stack to complete", lambda: stack_status(cfn, "probe-roll") == "UPDATE_COMPLETE", 30)

    check(seen_min[0] >= 2, f"{seen_min[0]} instances in service during the roll, MinInstancesInService is 2")
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
    check(group["DesiredCapacity"] == 3 and len(group["Instances"]) == 3, f"group after the roll: {group}")
    check(all(i["LifecycleState"] == "InService" and i["LaunchTemplate"]["Version"] == "2"
              for i in group["Instances"]), f"instances after the roll: {group['Instances']}")
    ids = [i["InstanceId"] for i in group["Instances"]]
    types = {i["InstanceType"] for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]}
    check(types == {"m5.xlarge"}, f"instance types after the roll: {types}")
    check(all(ec2_state(ec2, i) == "terminated" for i in old), "an old instance still runs")


def probe_rolls_in_depends_on_order(port: int) -> None:
    # Two groups of one stack, "Later" (first in the template) depending on "Earlier": Earlier
    # rolls first, and Later starts only when Earlier has no old instance left.
    tenant = account()
    cfn, autoscaling = client(port, "cloudformation", tenant), client(port, "autoscaling", tenant)

    def template(instance_type: str) -> str:
        resources: dict[str, Any] = {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.9.0.0/16"}},
            "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {
                "VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.9.0.0/24", "AvailabilityZone": f"{REGION}a"}},
            "LaunchTemplate": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {
                "LaunchTemplateData": {"ImageId": "ami-12c6146b", "InstanceType": instance_type}}},
        }
        for name, depends in (("Later", "Earlier"), ("Earlier", None)):
            resources[name] = {
                "Type": "AWS::AutoScaling::AutoScalingGroup",
                "Properties": {
                    "MinSize": "1", "MaxSize": "1", "DesiredCapacity": "1", "VPCZoneIdentifier": [{"Ref": "Subnet"}],
                    "LaunchTemplate": {"LaunchTemplateId": {"Ref": "LaunchTemplate"},
                                       "Version": {"Fn::GetAtt": ["LaunchTemplate", "LatestVersionNumber"]}}},
                "UpdatePolicy": {"AutoScalingRollingUpdate": {"MaxBatchSize": "1", "PauseTime": "PT1M"}},
            }
            if depends:
                resources[name]["DependsOn"] = depends
        return json.dumps({"Resources": resources,
                           "Outputs": {n: {"Value": {"Ref": n}} for n in ("Earlier", "Later")}})

    with scaled(port, 0.05):
        cfn.create_stack(StackName="probe-chain", TemplateBody=template("m5.large"))
        outputs = cfn.describe_stacks(StackName="probe-chain")["Stacks"][0]["Outputs"]
        names = {o["OutputKey"]: o["OutputValue"] for o in outputs}

        def versions(group: str) -> set[str]:
            found = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"]
            return {i["LaunchTemplate"]["Version"] for i in found[0]["Instances"]}

        cfn.update_stack(StackName="probe-chain", TemplateBody=template("m5.xlarge"))
        while stack_status(cfn, "probe-chain") == "UPDATE_IN_PROGRESS":
            earlier, later = versions(names["Earlier"]), versions(names["Later"])
            check(later == {"1"} or earlier == {"2"}, f"Later rolled to {later} while Earlier had {earlier}")
            time.sleep(0.2)
        check(stack_status(cfn, "probe-chain") == "UPDATE_COMPLETE", stack_status(cfn, "probe-chain"))
        check(versions(names["Earlier"]) == versions(names["Later"]) == {"2"}, "a group did not roll")


def probe_group_deletion_hooks(port: int) -> None:
    # With group_deletion_hooks on, deleting a stack drains its group through the terminating
    # hook: DELETE_IN_PROGRESS until every instance has been completed. Off, the delete is
    # immediate (moto's behaviour, kept for suites that do not drain).
    tenant = account()
    cfn, autoscaling, ec2 = (client(port, s, tenant) for s in ("cloudformation", "autoscaling", "ec2"))
    with scaled(port, 0.05, group_deletion_hooks=False):
        cfn.create_stack(StackName="probe-undrained", TemplateBody=group_template(1, "m5.large", {}, True))
        cfn.delete_stack(StackName="probe-undrained")
        expect_error(lambda: cfn.describe_stacks(StackName="probe-undrained"), "ValidationError")
    with scaled(port, 0.05, group_deletion_hooks=True):
        cfn.create_stack(StackName="probe-drain", TemplateBody=group_template(2, "m5.large", {}, True))
        stack = cfn.describe_stacks(StackName="probe-drain")["Stacks"][0]
        name, stack_id = stack["Outputs"][0]["OutputValue"], stack["StackId"]
        instances = sorted(group_states(autoscaling, name))
        cfn.delete_stack(StackName="probe-drain")
        check(stack_status(cfn, "probe-drain") == "DELETE_IN_PROGRESS", "the delete did not wait for the hooks")
        check(group_states(autoscaling, name) == {i: "Terminating:Wait" for i in instances},
              f"instances while the stack deletes: {group_states(autoscaling, name)}")
        cfn.delete_stack(StackName="probe-drain")  # accepted again, changes nothing
        expect_error(lambda: cfn.update_stack(StackName="probe-drain",
                                              TemplateBody=group_template(2, "m5.large", {}, True)),
                     "ValidationError", f"Stack:{stack_id} is in DELETE_IN_PROGRESS state and can not be updated.")
        autoscaling.complete_lifecycle_action(AutoScalingGroupName=name, LifecycleHookName="NodePool",
                                              InstanceId=instances[0], LifecycleActionResult="CONTINUE")
        check(stack_status(cfn, "probe-drain") == "DELETE_IN_PROGRESS", "the stack went with an instance waiting")
        autoscaling.complete_lifecycle_action(AutoScalingGroupName=name, LifecycleHookName="NodePool",
                                              InstanceId=instances[1], LifecycleActionResult="CONTINUE")
        eventually("the stack to be deleted", lambda: stack_status(cfn, stack_id) == "DELETE_COMPLETE", 30)
        expect_error(lambda: cfn.describe_stacks(StackName="probe-drain"), "ValidationError")
        check(autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"] == [],
              "the group survived its stack")
        check(all(ec2_state(ec2, i) == "terminated" for i in instances), "an instance survived its stack")
        statuses = [e["ResourceStatus"] for e in cfn.describe_stack_events(StackName=stack_id)["StackEvents"]]
        check(statuses[:2] == ["DELETE_COMPLETE", "DELETE_IN_PROGRESS"] and statuses.count("DELETE_IN_PROGRESS") == 1,
              f"stack events {statuses}")

def probe_security_group_in_use(port: int) -> None:
    # A load balancer's security group, as the cloud provider leaves it: refused while the load
    # balancer, an interface or another group's rule uses it, deleted once none does.
    tenant = account()
    ec2 = client(port, "ec2", tenant)
    elb = client(port, "elb", tenant)
    vpc = ec2.create_vpc(CidrBlock="10.6.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.6.0.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="probe-elb", Description="elb", VpcId=vpc)["GroupId"]
    nodes = ec2.create_security_group(GroupName="probe-nodes", Description="nodes", VpcId=vpc)["GroupId"]

    def refused() -> bool:
        try:
            ec2.delete_security_group(GroupId=group)
        except ClientError as err:
            check(error_code(err) == "DependencyViolation", f"unexpected error {error_code(err)}")
            return True
        return False

    elb.create_load_balancer(
        LoadBalancerName="probe-elb", Subnets=[subnet], SecurityGroups=[group],
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 80}])
    check(refused(), "a group a load balancer uses was deleted")
    elb.delete_load_balancer(LoadBalancerName="probe-elb")
    eni = ec2.create_network_interface(SubnetId=subnet, Groups=[group])["NetworkInterface"]["NetworkInterfaceId"]
    check(refused(), "a group an interface carries was deleted")
    ec2.delete_network_interface(NetworkInterfaceId=eni)
    permission = {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "UserIdGroupPairs": [{"GroupId": group}]}
    ec2.authorize_security_group_ingress(GroupId=nodes, IpPermissions=[permission])
    check(refused(), "a group another group's rule references was deleted")
    ec2.revoke_security_group_ingress(GroupId=nodes, IpPermissions=[permission])
    check(not refused(), "an unused group was refused")
    left = ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [group]}])["SecurityGroups"]
    check(left == [], f"the group survived its deletion: {left}")


def probe_hosted_zone_deleted_with_its_stack(port: int) -> None:
    # A cluster's zone is deleted with its stack; with a record external-dns wrote into it, the
    # stack's deletion fails and the zone stays.
    tenant = account()
    cfn = client(port, "cloudformation", tenant)
    r53 = client(port, "route53", tenant)

    def create(name: str, domain: str) -> str:
        template = json.dumps({"Resources": {
            "HostedZone": {"Type": "AWS::Route53::HostedZone", "Properties": {"Name": f"{domain}."}},
            "ApiRecordSet": {"Type": "AWS::Route53::RecordSet", "Properties": {
                "HostedZoneId": {"Ref": "HostedZone"}, "Name": f"api.{domain}.", "Type": "CNAME",
                "TTL": "300", "ResourceRecords": ["lb.example.org"]}},
        }, "Outputs": {"Zone": {"Value": {"Ref": "HostedZone"}}}})
        cfn.create_stack(StackName=name, TemplateBody=template)
        outputs = cfn.describe_stacks(StackName=name)["Stacks"][0]["Outputs"]
        return next(o["OutputValue"] for o in outputs if o["OutputKey"] == "Zone")

    def zone_exists(zone: str) -> bool:
        try:
            r53.get_hosted_zone(Id=zone)
            return True
        except ClientError as err:
            check(error_code(err) == "NoSuchHostedZone", f"unexpected error {error_code(err)}")
            return False

    empty = create("probe-zone-empty", "empty.example.org")
    cfn.delete_stack(StackName="probe-zone-empty")
    check(not zone_exists(empty), "the zone survived its stack")

    busy = create("probe-zone-busy", "busy.example.org")
    shop = {"Name": "shop.busy.example.org.", "Type": "A", "TTL": 300, "ResourceRecords": [{"Value": "10.0.0.1"}]}
    r53.change_resource_record_sets(
        HostedZoneId=busy, ChangeBatch={"Changes": [{"Action": "CREATE", "ResourceRecordSet": shop}]})
    try:
        cfn.delete_stack(StackName="probe-zone-busy")
    except ClientError as err:
        check(error_code(err) == "HostedZoneNotEmpty", f"unexpected error {error_code(err)}")
    check(zone_exists(busy), "a zone with a foreign record was deleted with its stack")


def probe_load_balancer_from_template(port: int) -> None:
    # A stack's classic load balancer is in its template's subnets and security group, and
    # carries its template's tags, the stack's and CloudFormation's own.
    tenant = account()
    ec2 = client(port, "ec2", tenant)
    cfn = client(port, "cloudformation", tenant)
    elb = client(port, "elb", tenant)
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.0.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="probe-api-elb", Description="api", VpcId=vpc)["GroupId"]
    template = json.dumps({"Resources": {"ApiLoadBalancer": {
        "Type": "AWS::ElasticLoadBalancing::LoadBalancer", "Properties": {
            "LoadBalancerName": "probe-api", "Subnets": [subnet], "SecurityGroups": [group], "Scheme": "internal",
            "Listeners": [{"LoadBalancerPort": "443", "Protocol": "TCP", "InstancePort": "443"}],
            "Tags": [{"Key": "Name", "Value": "probe-api"}]}}}})
    stack_tags = [{"Key": "kubernetes.io/cluster/probe", "Value": "owned"}, {"Key": "giantswarm.io/stack", "Value": "tccp"}]
    cfn.create_stack(StackName="probe-lb", TemplateBody=template, Tags=stack_tags)
    lb = elb.describe_load_balancers(LoadBalancerNames=["probe-api"])["LoadBalancerDescriptions"][0]
    placed = (lb.get("VPCId"), lb.get("Subnets"), lb.get("SecurityGroups"))
    check(placed == (vpc, [subnet], [group]), f"the load balancer is not where its template puts it: {placed}")
    described = elb.describe_tags(LoadBalancerNames=["probe-api"])["TagDescriptions"][0]["Tags"]
    tags = {t["Key"]: t["Value"] for t in described}
    want = {
        "Name": "probe-api",
        "kubernetes.io/cluster/probe": "owned",
        "giantswarm.io/stack": "tccp",
        "aws:cloudformation:stack-name": "probe-lb",
        "aws:cloudformation:logical-id": "ApiLoadBalancer",
    }
    missing = {k: v for k, v in want.items() if tags.get(k) != v}
    check(not missing, f"the stack's load balancer lacks {missing}: {tags}")


def drift_template() -> dict[str, Any]:
    """A stack with each resource type the emulator checks for drift, and one it does not."""
    return {"Resources": {
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.8.0.0/16"}},
        "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {
            "VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.8.0.0/24", "AvailabilityZone": f"{REGION}a"}},
        "Gateway": {"Type": "AWS::EC2::InternetGateway"},
        "Attachment": {"Type": "AWS::EC2::VPCGatewayAttachment", "Properties": {
            "VpcId": {"Ref": "Vpc"}, "InternetGatewayId": {"Ref": "Gateway"}}},
        "Table": {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": {"Ref": "Vpc"}}},
        "DefaultRoute": {"Type": "AWS::EC2::Route", "DependsOn": "Attachment", "Properties": {
            "RouteTableId": {"Ref": "Table"}, "DestinationCidrBlock": "0.0.0.0/0",
            "GatewayId": {"Ref": "Gateway"}}},
        "Masters": {"Type": "AWS::EC2::SecurityGroup", "Properties": {
            "GroupDescription": "masters", "VpcId": {"Ref": "Vpc"},
            "SecurityGroupIngress": [{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443,
                                      "CidrIp": "10.0.0.0/8", "Description": "API"}]}},
        "Workers": {"Type": "AWS::EC2::SecurityGroup", "Properties": {
            "GroupDescription": "workers", "VpcId": {"Ref": "Vpc"}}},
        "WorkersToMasters": {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {
            "GroupId": {"Ref": "Masters"}, "SourceSecurityGroupId": {"Ref": "Workers"},
            "IpProtocol": "-1"}},
        "Template": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {
            "ImageId": "ami-0a1b2c3d4e5f60001", "InstanceType": "m5.large",
            "UserData": "c2VjcmV0"}}},
        "Group": {"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": {
            "MinSize": "1", "MaxSize": "3", "DesiredCapacity": "1",
            "VPCZoneIdentifier": [{"Ref": "Subnet"}],
            "LaunchTemplate": {"LaunchTemplateId": {"Ref": "Template"},
                               "Version": {"Fn::GetAtt": ["Template", "LatestVersionNumber"]}}}},
    }}


def detect(cfn: Any, stack: str, in_progress: bool = False) -> dict[str, Any]:
    """Run DetectStackDrift on ``stack`` and wait for it; with ``in_progress`` check that the
    detection is first reported as running."""
    detection = cfn.detect_stack_drift(StackName=stack)["StackDriftDetectionId"]
    if in_progress:
        first = cfn.describe_stack_drift_detection_status(StackDriftDetectionId=detection)
        check(first["DetectionStatus"] == "DETECTION_IN_PROGRESS", f"a detection started done: {first}")
        check("StackDriftStatus" not in first, f"a running detection has a result: {first}")

    def done() -> Any:
        status = cfn.describe_stack_drift_detection_status(StackDriftDetectionId=detection)
        return status if status["DetectionStatus"] == "DETECTION_COMPLETE" else None

    status = eventually("the drift detection", done, timeout=30)
    check(status["StackDriftDetectionId"] == detection, f"another detection answered: {status}")
    return status


def resource_drifts(cfn: Any, stack: str, **filters: Any) -> dict[str, dict[str, Any]]:
    drifts: list[dict[str, Any]] = []
    token: dict[str, str] = {}
    while True:
        page = cfn.describe_stack_resource_drifts(StackName=stack, MaxResults=2, **filters, **token)
        drifts += page["StackResourceDrifts"]
        if not page.get("NextToken"):
            break
        token = {"NextToken": page["NextToken"]}
    return {d["LogicalResourceId"]: d for d in drifts}


def probe_drift_detection(port: int) -> None:
    tenant = account()
    cfn = client(port, "cloudformation", tenant)
    ec2 = client(port, "ec2", tenant)
    autoscaling = client(port, "autoscaling", tenant)
    stack = "probe-drift"
    expect_error(lambda: cfn.detect_stack_drift(StackName=stack), "ValidationError",
                 f"Stack with id {stack} does not exist")
    cfn.create_stack(StackName=stack, TemplateBody=json.dumps(drift_template()))
    ids = {r["LogicalResourceId"]: r.get("PhysicalResourceId")
           for r in cfn.describe_stack_resources(StackName=stack)["StackResources"]}
    masters, workers, group = ids["Masters"], ids["Workers"], ids["Group"]
    table = ids["Table"]

    with scaled(port, 0.4):  # 4 s in progress
        status = detect(cfn, stack, in_progress=True)
    # An untouched stack is in sync, and only the checked types are listed.
    check(status["StackDriftStatus"] == "IN_SYNC", f"untouched stack: {status}")
    check(status["DriftedStackResourceCount"] == 0, f"untouched stack: {status}")
    drifts = resource_drifts(cfn, stack)
    check(sorted(drifts) == ["DefaultRoute", "Group", "Masters", "Workers", "WorkersToMasters"],
          f"checked resources: {sorted(drifts)}")
    check(all(d["StackResourceDriftStatus"] == "IN_SYNC" and not d["PropertyDifferences"]
              for d in drifts.values()), f"untouched resources drifted: {drifts}")
    expected = json.loads(drifts["Masters"]["ExpectedProperties"])
    check(expected["VpcId"] == ids["Vpc"], f"references are resolved in ExpectedProperties: {expected}")

    # By hand, through the services' own APIs: a rule added, a group resized, a route deleted,
    # a standalone rule revoked.
    ec2.authorize_security_group_ingress(GroupId=masters, IpPermissions=[{
        "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "203.0.113.0/24"}]}])
    autoscaling.update_auto_scaling_group(AutoScalingGroupName=group, MaxSize=5)
    ec2.delete_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0")
    ec2.revoke_security_group_ingress(GroupId=masters, IpPermissions=[{
        "IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": workers}]}])
    live = ec2.describe_security_groups(GroupIds=[masters])["SecurityGroups"][0]["IpPermissions"]
    check(any(r.get("FromPort") == 22 for r in live), f"the hand-added rule is not there: {live}")

    status = detect(cfn, stack)
    check(status["StackDriftStatus"] == "DRIFTED", f"changed stack: {status}")
    check(status["DriftedStackResourceCount"] == 4, f"changed stack: {status}")
    drifts = resource_drifts(cfn, stack)
    sg = drifts["Masters"]
    check(sg["StackResourceDriftStatus"] == "MODIFIED", f"security group: {sg}")
    check(sg["PhysicalResourceId"] == masters, f"security group: {sg}")
    (added,) = sg["PropertyDifferences"]
    check(added["DifferenceType"] == "ADD" and added["PropertyPath"].startswith("/SecurityGroupIngress/"),
          f"the added rule: {added}")
    check(added["ExpectedValue"] == "null", f"the added rule: {added}")
    check(json.loads(added["ActualValue"]) == {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                                               "CidrIp": "203.0.113.0/24"}, f"the added rule: {added}")
    actual = json.loads(sg["ActualProperties"])
    check(len(actual["SecurityGroupIngress"]) == 2, f"ActualProperties: {actual}")
    asg = drifts["Group"]
    check(asg["StackResourceDriftStatus"] == "MODIFIED", f"group: {asg}")
    check(asg["PropertyDifferences"] == [{"PropertyPath": "/MaxSize", "ExpectedValue": "3", "ActualValue": "5",
                                          "DifferenceType": "NOT_EQUAL"}], f"group: {asg}")
    check(json.loads(asg["ActualProperties"])["MaxSize"] == "5", f"group: {asg}")
    for deleted in ("DefaultRoute", "WorkersToMasters"):
        d = drifts[deleted]
        check(d["StackResourceDriftStatus"] == "DELETED" and "ActualProperties" not in d, f"{deleted}: {d}")
    check(drifts["Workers"]["StackResourceDriftStatus"] == "IN_SYNC", f"workers: {drifts['Workers']}")
    modified = resource_drifts(cfn, stack, StackResourceDriftStatusFilters=["MODIFIED"])
    check(sorted(modified) == ["Group", "Masters"], f"filtered: {sorted(modified)}")
    one = cfn.detect_stack_resource_drift(StackName=stack, LogicalResourceId="Group")["StackResourceDrift"]
    check(one["StackResourceDriftStatus"] == "MODIFIED", f"DetectStackResourceDrift: {one}")

    # Put back through the APIs: in sync again.
    ec2.revoke_security_group_ingress(GroupId=masters, IpPermissions=[{
        "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "203.0.113.0/24"}]}])
    autoscaling.update_auto_scaling_group(AutoScalingGroupName=group, MaxSize=3)
    ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=ids["Gateway"])
    ec2.authorize_security_group_ingress(GroupId=masters, IpPermissions=[{
        "IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": workers}]}])
    status = detect(cfn, stack)
    check(status["StackDriftStatus"] == "IN_SYNC", f"restored stack: {status} {resource_drifts(cfn, stack)}")

    # A route pointed elsewhere is a NOT_EQUAL of its target.
    other = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.replace_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=other)
    one = cfn.detect_stack_resource_drift(StackName=stack, LogicalResourceId="DefaultRoute")["StackResourceDrift"]
    check(one["StackResourceDriftStatus"] == "MODIFIED", f"a redirected route: {one}")
    check(one["PropertyDifferences"] == [{"PropertyPath": "/GatewayId", "ExpectedValue": ids["Gateway"],
                                          "ActualValue": other, "DifferenceType": "NOT_EQUAL"}],
          f"a redirected route: {one}")
    ec2.replace_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=ids["Gateway"])

    # A removed inline rule is a REMOVE; a type without drift support is not checked.
    ec2.revoke_security_group_ingress(GroupId=masters, IpPermissions=[{
        "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "IpRanges": [{"CidrIp": "10.0.0.0/8"}]}])
    one = cfn.detect_stack_resource_drift(StackName=stack, LogicalResourceId="Masters")["StackResourceDrift"]
    check([(d["PropertyPath"], d["DifferenceType"], d["ActualValue"]) for d in one["PropertyDifferences"]]
          == [("/SecurityGroupIngress/0", "REMOVE", "null")], f"a removed rule: {one}")
    expect_error(lambda: cfn.detect_stack_resource_drift(StackName=stack, LogicalResourceId="Template"),
                 "ValidationError")
    expect_error(lambda: cfn.describe_stack_drift_detection_status(StackDriftDetectionId="no-such-id"),
                 "ValidationError")


def probe_execute_change_set(port: int) -> None:
    cfn = client(port, "cloudformation", account())
    name = "probe-change-set"

    def template(v: str) -> str:
        return json.dumps({
            "Resources": {"Sg": {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": f"d{v}"}}},
            "Outputs": {"Hash": {"Value": f"h{v}"}},
        })

    cfn.create_stack(StackName=name, TemplateBody=template("1"))
    for cs in ("probe-cs-a", "probe-cs-b"):
        cfn.create_change_set(StackName=name, ChangeSetName=cs, TemplateBody=template("2"), ChangeSetType="UPDATE",
                              Tags=[{"Key": "k", "Value": cs}])
    cfn.execute_change_set(StackName=name, ChangeSetName="probe-cs-a")
    stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    check(stack["StackStatus"] == "UPDATE_COMPLETE", f"status {stack['StackStatus']}")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    check(outputs.get("Hash") == "h2", f"outputs not recomputed: {outputs}")
    check({"Key": "k", "Value": "probe-cs-a"} in stack.get("Tags", []), f"tags not applied: {stack.get('Tags')}")
    left = [s["ChangeSetName"] for s in cfn.list_change_sets(StackName=name)["Summaries"]
            if s.get("StackName") == name]
    check(left == [], f"change sets left after execution: {left}")
    try:
        cfn.delete_change_set(StackName=name, ChangeSetName="probe-cs-b")
        raise AssertionError("deleting a missing change set succeeded")
    except ClientError as err:
        check(error_code(err) == "ChangeSetNotFound", f"unexpected error {error_code(err)}")


def probe_bucket_owner_enforced(port: int) -> None:
    """A new bucket refuses ACLs (AccessControlListNotSupported); log delivery granted by bucket
    policy is accepted; a bucket created with ObjectWriter still takes ACLs."""
    s3 = client(port, "s3", account())
    location = {"LocationConstraint": REGION}
    source, logs, legacy = (f"probe-{random.randint(0, 10**9)}-{n}" for n in ("src", "logs", "legacy"))
    for name in (source, logs):
        s3.create_bucket(Bucket=name, CreateBucketConfiguration=location)
    rules = s3.get_bucket_ownership_controls(Bucket=logs)["OwnershipControls"]["Rules"]
    check(rules == [{"ObjectOwnership": "BucketOwnerEnforced"}], f"a new bucket's ownership: {rules}")
    log_delivery = 'uri="http://acs.amazonaws.com/groups/s3/LogDelivery"'
    expect_error(
        lambda: s3.put_bucket_acl(Bucket=logs, GrantWrite=log_delivery, GrantReadACP=log_delivery),
        "AccessControlListNotSupported",
        "The bucket does not allow ACLs",
    )
    policy = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "logging.s3.amazonaws.com"},
            "Action": ["s3:PutObject"],
            "Resource": f"arn:aws:s3:::{logs}/{source}/*",
            "Condition": {"ArnLike": {"aws:SourceArn": f"arn:aws:s3:::{source}"}},
        }],
    }
    s3.put_bucket_policy(Bucket=logs, Policy=json.dumps(policy))
    s3.put_bucket_logging(
        Bucket=source,
        BucketLoggingStatus={"LoggingEnabled": {"TargetBucket": logs, "TargetPrefix": f"{source}/"}},
    )
    enabled = s3.get_bucket_logging(Bucket=source).get("LoggingEnabled", {})
    check(enabled.get("TargetBucket") == logs, f"logging by policy: {enabled}")
    s3.create_bucket(Bucket=legacy, CreateBucketConfiguration=location, ObjectOwnership="ObjectWriter")
    s3.put_bucket_acl(Bucket=legacy, GrantWrite=log_delivery, GrantReadACP=log_delivery)



def probe_kms_key_policy_reads(port: int) -> None:
    """A key whose policy does not let the account read it answers AccessDeniedException to
    DescribeKey and ListResourceTags; a key with the default policy answers both."""
    acct = account()
    kms = client(port, "kms", acct)
    own = kms.create_key(Description="probe default policy", Tags=[{"TagKey": "t", "TagValue": "v"}])
    own_id = own["KeyMetadata"]["KeyId"]
    check(kms.describe_key(KeyId=own_id)["KeyMetadata"]["KeyId"] == own_id, "DescribeKey of the default policy")
    tags = kms.list_resource_tags(KeyId=own_id)["Tags"]
    check(tags == [{"TagKey": "t", "TagValue": "v"}], f"tags of the default policy: {tags}")
    shut_out = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::111122223333:role/KeyAdmin"},
            "Action": "kms:*",
            "Resource": "*",
        }],
    }
    foreign = kms.create_key(Policy=json.dumps(shut_out), BypassPolicyLockoutSafetyCheck=True)
    foreign_id = foreign["KeyMetadata"]["KeyId"]
    expect_error(lambda: kms.list_resource_tags(KeyId=foreign_id), "AccessDeniedException")
    expect_error(lambda: kms.describe_key(KeyId=foreign_id), "AccessDeniedException")
    denied = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{acct}:root"}, "Action": "kms:*", "Resource": "*"},
            {"Effect": "Deny", "Principal": "*", "Action": "kms:ListResourceTags", "Resource": "*"},
        ],
    }
    deny = kms.create_key(Policy=json.dumps(denied), BypassPolicyLockoutSafetyCheck=True)["KeyMetadata"]["KeyId"]
    expect_error(lambda: kms.list_resource_tags(KeyId=deny), "AccessDeniedException")
    check(kms.describe_key(KeyId=deny)["KeyMetadata"]["KeyId"] == deny, "DescribeKey is not denied")


def probe_throttling(port: int) -> None:
    """Over its request rate, each service answers with the throttling error its SDKs retry
    (Amazon EC2 API Reference, "Request throttling": ``RequestLimitExceeded``; S3 ``SlowDown``;
    KMS ``ThrottlingException``; ``Throttling`` from CloudFormation, Auto Scaling, Elastic Load
    Balancing, Route53 and STS), and a refused request changes nothing."""
    tenant = account()
    previous = emulation(port)
    try:
        emulation(port, throttle_share=1.0)
        calls: list[tuple[str, str, Callable[[Any], Any]]] = [
            ("ec2", "RequestLimitExceeded", lambda c: c.describe_vpcs()),
            ("s3", "SlowDown", lambda c: c.create_bucket(
                Bucket=f"probe-throttled-{tenant}", CreateBucketConfiguration={"LocationConstraint": REGION})),
            ("kms", "ThrottlingException", lambda c: c.create_key()),
            ("cloudformation", "Throttling", lambda c: c.describe_stacks()),
            ("autoscaling", "Throttling", lambda c: c.describe_auto_scaling_groups()),
            ("elb", "Throttling", lambda c: c.describe_load_balancers()),
            ("route53", "Throttling", lambda c: c.list_hosted_zones()),
            ("sts", "Throttling", lambda c: c.get_caller_identity()),
        ]
        for service, code, call in calls:
            try:
                call(client(port, service, tenant))
                raise AssertionError(f"{service} answered at a throttle share of 1")
            except ClientError as err:
                check(error_code(err) == code, f"{service} answered {error_code(err)}, not {code}")
        emulation(port, throttle_share=0.0)
        s3 = client(port, "s3", tenant)
        names = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
        check(f"probe-throttled-{tenant}" not in names, "a throttled CreateBucket created the bucket")
        check(client(port, "kms", tenant).list_keys()["Keys"] == [], "a throttled CreateKey created a key")
        # At a share of 0.5, an SDK with retries gets every answer, and some calls were refused.
        emulation(port, throttle_share=0.5)
        retrying = boto3.client(
            "ec2", region_name=REGION, endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="AKIAPROBE",
            aws_secret_access_key="probe", config=Config(retries={"mode": "standard", "max_attempts": 20}),
        )
        for _ in range(20):
            retrying.describe_regions()
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/request-log") as answer:
            log = json.loads(answer.read())
        regions = [e for e in log if e.get("action") == "DescribeRegions"]
        refused = [e for e in regions if e.get("throttled")]
        check(len(regions) - len(refused) >= 20 and refused, f"{len(refused)} of {len(regions)} refused")
    finally:
        emulation(port, throttle_share=previous.get("throttle_share", 0.0))
    try:
        emulation(port, throttle_share=1.5)
        raise AssertionError("a throttle share of 1.5 was accepted")
    except Exception as err:  # urllib's HTTPError: 400 with the fix
        check("400" in str(err), f"a throttle share of 1.5 gave {err}")


def _jwt(key: Any, kid: str, claims: dict[str, Any]) -> str:
    """An ES256 JWT of ``claims`` signed with the P-256 ``key``."""
    import base64

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()  # noqa: E731
    head = enc(json.dumps({"alg": "ES256", "kid": kid, "typ": "JWT"}).encode())
    body = enc(json.dumps(claims).encode())
    r, s_ = decode_dss_signature(key.sign(f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256())))
    return f"{head}.{body}.{enc(r.to_bytes(32, 'big') + s_.to_bytes(32, 'big'))}"


def probe_web_identity(port: int) -> None:
    """AssumeRoleWithWebIdentity accepts a token signed with a key of the issuer's published
    JWKS, for an audience of the OIDC provider, under the role's trust conditions, and refuses
    every other (AWS STS API Reference, AssumeRoleWithWebIdentity, "Errors")."""
    import base64

    from cryptography.hazmat.primitives.asymmetric import ec

    acct = account()
    s3, iam, sts = client(port, "s3", acct), client(port, "iam", acct), client(port, "sts", acct)
    bucket = f"{acct}-g8s-probe-oidc-pod-identity-v2"
    issuer = f"https://s3.{REGION}.amazonaws.com/{bucket}"
    host = issuer[len("https://"):]
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    key = ec.generate_private_key(ec.SECP256R1())
    nums = key.public_key().public_numbers()
    enc = lambda i: base64.urlsafe_b64encode(i.to_bytes(32, "big")).rstrip(b"=").decode()  # noqa: E731
    jwks = {"keys": [{"kty": "EC", "crv": "P-256", "x": enc(nums.x), "y": enc(nums.y), "kid": "k1", "alg": "ES256", "use": "sig"}]}
    s3.put_object(Bucket=bucket, Key=".well-known/openid-configuration",
                  Body=json.dumps({"issuer": issuer, "jwks_uri": f"{issuer}/keys.json"}).encode())
    s3.put_object(Bucket=bucket, Key="keys.json", Body=json.dumps(jwks).encode())
    provider = iam.create_open_id_connect_provider(Url=issuer, ClientIDList=["sts.amazonaws.com"])["OpenIDConnectProviderArn"]
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Federated": provider}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringLike": {f"{host}:sub": "system:serviceaccount:*:external-dns*"},
                      "StringEquals": {f"{host}:aud": "sts.amazonaws.com"}}}]}
    role = iam.create_role(RoleName="probe-irsa", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    claims = {"iss": issuer, "aud": ["sts.amazonaws.com"], "sub": "system:serviceaccount:kube-system:external-dns",
              "exp": int(time.time()) + 600, "iat": int(time.time())}

    def refused(call: Callable[[], Any], code: str, fragment: str = "") -> None:
        try:
            call()
        except ClientError as err:
            check(error_code(err) == code, f"error {error_code(err)} ({err}), want {code}")
            check(fragment in err.response["Error"]["Message"], f"{err} does not say {fragment!r}")
            return
        raise AssertionError(f"no {code} error")

    def assume(token: str) -> Any:
        return sts.assume_role_with_web_identity(RoleArn=role, RoleSessionName="probe", WebIdentityToken=token)

    # The bucket is private: STS cannot read the issuer's documents.
    refused(lambda: assume(_jwt(key, "k1", claims)), "InvalidIdentityToken", "retrieve verification key")
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}]}))
    check(assume(_jwt(key, "k1", claims))["AssumedRoleUser"]["Arn"].endswith("/probe"), "a valid token is accepted")
    refused(lambda: assume(_jwt(key, "k1", {**claims, "aud": "https://api.example.com"})), "InvalidIdentityToken", "audience")
    refused(lambda: assume(_jwt(ec.generate_private_key(ec.SECP256R1()), "k1", claims)), "InvalidIdentityToken", "signature")
    refused(lambda: assume(_jwt(key, "k1", {**claims, "exp": int(time.time()) - 60})), "ExpiredTokenException")
    refused(lambda: assume(_jwt(key, "k1", {**claims, "iss": "https://s3.eu-central-1.amazonaws.com/other"})),
                 "InvalidIdentityToken", "No OpenIDConnect provider")
    refused(lambda: assume(_jwt(key, "k1", {**claims, "sub": "system:serviceaccount:default:app"})), "AccessDenied")
    refused(lambda: assume("not-a-jwt"), "InvalidIdentityToken")


def probe_cloudfront(port: int) -> None:
    """A distribution keeps its origin's origin access control, is ``InProgress`` after a change
    until deployed, is deleted only disabled and deployed (``DistributionNotDisabled``), its origin
    access control only when no distribution uses it (``OriginAccessControlInUse``), and STS
    reads an issuer through it as CloudFront reads its origin (Amazon CloudFront API Reference,
    DeleteDistribution, DeleteOriginAccessControl; Developer Guide, "Restricting access to an
    Amazon S3 origin")."""
    import base64

    from cryptography.hazmat.primitives.asymmetric import ec

    def refused(call: Callable[[], Any], code: str, status: int, fragment: str = "") -> None:
        try:
            call()
        except ClientError as err:
            check(error_code(err) == code, f"error {error_code(err)} ({err}), want {code}")
            got = err.response["ResponseMetadata"]["HTTPStatusCode"]
            check(got == status, f"status {got} of {err}, want {status}")
            check(fragment in err.response["Error"]["Message"], f"{err} does not say {fragment!r}")
            return
        raise AssertionError(f"no {code} error")

    acct = account()
    cf, s3, iam, sts = (client(port, svc, acct) for svc in ("cloudfront", "s3", "iam", "sts"))
    bucket = f"{acct}-g8s-probe-oidc-pod-identity-v2"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    oac = cf.create_origin_access_control(OriginAccessControlConfig={
        "Name": f"probe-{acct}", "Description": "", "SigningProtocol": "sigv4", "SigningBehavior": "always",
        "OriginAccessControlOriginType": "s3"})
    oac_id = oac["OriginAccessControl"]["Id"]
    origin = f"{bucket}.s3.{REGION}.amazonaws.com"
    config = {"CallerReference": f"probe-{acct}", "Comment": "probe", "Enabled": True,
              "Origins": {"Quantity": 1, "Items": [{"Id": origin, "DomainName": origin, "OriginAccessControlId": oac_id,
                                                    "S3OriginConfig": {"OriginAccessIdentity": ""}}]},
              "DefaultCacheBehavior": {"TargetOriginId": origin, "ViewerProtocolPolicy": "redirect-to-https",
                                       "CachePolicyId": "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"}}
    dist = cf.create_distribution(DistributionConfig=config)["Distribution"]
    got = cf.get_distribution(Id=dist["Id"])
    check(got["Distribution"]["Status"] == "InProgress", f"a new distribution is {got['Distribution']['Status']}")
    kept = got["Distribution"]["DistributionConfig"]["Origins"]["Items"][0].get("OriginAccessControlId")
    check(kept == oac_id, f"the origin's access control is {kept!r}, want {oac_id}")
    refused(lambda: cf.delete_distribution(Id=dist["Id"], IfMatch=got["ETag"]), "DistributionNotDisabled", 409)
    refused(lambda: cf.delete_origin_access_control(Id=oac_id, IfMatch=oac["ETag"]), "OriginAccessControlInUse", 409)

    # STS reads the issuer through the distribution: the bucket grants it, and only it.
    host = dist["DomainName"]
    issuer = f"https://{host}"
    key = ec.generate_private_key(ec.SECP256R1())
    nums = key.public_key().public_numbers()
    enc = lambda i: base64.urlsafe_b64encode(i.to_bytes(32, "big")).rstrip(b"=").decode()  # noqa: E731
    jwks = {"keys": [{"kty": "EC", "crv": "P-256", "x": enc(nums.x), "y": enc(nums.y), "kid": "k1", "alg": "ES256"}]}
    s3.put_object(Bucket=bucket, Key=".well-known/openid-configuration",
                  Body=json.dumps({"issuer": issuer, "jwks_uri": f"{issuer}/keys.json"}).encode())
    s3.put_object(Bucket=bucket, Key="keys.json", Body=json.dumps(jwks).encode())
    s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    provider = iam.create_open_id_connect_provider(Url=issuer, ClientIDList=["sts.amazonaws.com"])["OpenIDConnectProviderArn"]
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Federated": provider}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{host}:aud": "sts.amazonaws.com"}}}]}
    role = iam.create_role(RoleName="probe-cdn", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    token = _jwt(key, "k1", {"iss": issuer, "aud": ["sts.amazonaws.com"], "sub": "system:serviceaccount:a:b",
                            "exp": int(time.time()) + 600, "iat": int(time.time())})

    def assume() -> Any:
        return sts.assume_role_with_web_identity(RoleArn=role, RoleSessionName="probe", WebIdentityToken=token)

    refused(assume, "InvalidIdentityToken", 400, "retrieve verification key")
    granted = lambda arn: json.dumps({"Version": "2012-10-17", "Statement": [{  # noqa: E731
        "Effect": "Allow", "Principal": {"Service": "cloudfront.amazonaws.com"}, "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/*", "Condition": {"StringEquals": {"AWS:SourceArn": arn}}}]})
    s3.put_bucket_policy(Bucket=bucket, Policy=granted(dist["ARN"] + "X"))
    refused(assume, "InvalidIdentityToken", 400, "retrieve verification key")
    s3.put_bucket_policy(Bucket=bucket, Policy=granted(dist["ARN"]))
    check(assume()["AssumedRoleUser"]["Arn"].endswith("/probe"), "a token is accepted through the distribution")

    # Disabled, then deployed: deleted.
    config_now = cf.get_distribution_config(Id=dist["Id"])
    disabled = {**config_now["DistributionConfig"], "Enabled": False}
    cf.update_distribution(Id=dist["Id"], IfMatch=config_now["ETag"], DistributionConfig=disabled)
    got = cf.get_distribution(Id=dist["Id"])
    check(got["Distribution"]["Status"] == "InProgress", f"an updated distribution is {got['Distribution']['Status']}")
    refused(lambda: cf.delete_distribution(Id=dist["Id"], IfMatch=got["ETag"]), "DistributionNotDisabled", 409)
    refused(assume, "InvalidIdentityToken", 400, "retrieve verification key")
    eventually("the disabled distribution to be deployed",
               lambda: cf.get_distribution(Id=dist["Id"])["Distribution"]["Status"] == "Deployed" or None, timeout=30)
    cf.delete_distribution(Id=dist["Id"], IfMatch=cf.get_distribution(Id=dist["Id"])["ETag"])
    cf.delete_origin_access_control(Id=oac_id, IfMatch=oac["ETag"])

    # Origin access identities: a distribution reading its bucket through one; the identity is
    # deleted only when no origin names it.
    oai = cf.create_cloud_front_origin_access_identity(CloudFrontOriginAccessIdentityConfig={
        "CallerReference": f"probe-{acct}", "Comment": "probe"})
    oai_id = oai["CloudFrontOriginAccessIdentity"]["Id"]
    listed = cf.list_cloud_front_origin_access_identities()["CloudFrontOriginAccessIdentityList"].get("Items", [])
    check([i["Id"] for i in listed] == [oai_id], f"listed identities {listed}")
    with_oai = {**config, "CallerReference": f"probe-oai-{acct}", "Origins": {"Quantity": 1, "Items": [{
        "Id": origin, "DomainName": origin,
        "S3OriginConfig": {"OriginAccessIdentity": f"origin-access-identity/cloudfront/{oai_id}"}}]}}
    dist = cf.create_distribution(DistributionConfig=with_oai)["Distribution"]
    host = dist["DomainName"]
    issuer = f"https://{host}"
    s3.put_object(Bucket=bucket, Key=".well-known/openid-configuration",
                  Body=json.dumps({"issuer": issuer, "jwks_uri": f"{issuer}/keys.json"}).encode())
    provider = iam.create_open_id_connect_provider(Url=issuer, ClientIDList=["sts.amazonaws.com"])["OpenIDConnectProviderArn"]
    trust["Statement"][0]["Principal"]["Federated"] = provider
    trust["Statement"][0]["Condition"] = {"StringEquals": {f"{host}:aud": "sts.amazonaws.com"}}
    iam.update_assume_role_policy(RoleName="probe-cdn", PolicyDocument=json.dumps(trust))
    token = _jwt(key, "k1", {"iss": issuer, "aud": ["sts.amazonaws.com"], "sub": "system:serviceaccount:a:b",
                            "exp": int(time.time()) + 600, "iat": int(time.time())})
    refused(assume, "InvalidIdentityToken", 400, "retrieve verification key")
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*",
        "Principal": {"AWS": f"arn:aws:iam::cloudfront:user/CloudFront Origin Access Identity {oai_id}"}}]}))
    check(assume()["AssumedRoleUser"]["Arn"].endswith("/probe"), "a token is accepted through the identity")
    refused(lambda: cf.delete_cloud_front_origin_access_identity(Id=oai_id, IfMatch=oai["ETag"]),
            "CloudFrontOriginAccessIdentityInUse", 409)
    config_now = cf.get_distribution_config(Id=dist["Id"])
    cf.update_distribution(Id=dist["Id"], IfMatch=config_now["ETag"],
                           DistributionConfig={**config_now["DistributionConfig"], "Enabled": False})
    eventually("the disabled distribution to be deployed",
               lambda: cf.get_distribution(Id=dist["Id"])["Distribution"]["Status"] == "Deployed" or None, timeout=30)
    cf.delete_distribution(Id=dist["Id"], IfMatch=cf.get_distribution(Id=dist["Id"])["ETag"])
    etag = cf.get_cloud_front_origin_access_identity(Id=oai_id)["ETag"]
    cf.delete_cloud_front_origin_access_identity(Id=oai_id, IfMatch=etag)
    refused(lambda: cf.get_cloud_front_origin_access_identity(Id=oai_id), "NoSuchCloudFrontOriginAccessIdentity", 404)


def probe_account_limits(port: int) -> None:
    """CloudFormation and Auto Scaling ``DescribeAccountLimits`` answer AWS's defaults, the
    account's current group count, and an account's own limits once set (correction 25)."""
    tenant, other = account(), account()
    cfn, asg = client(port, "cloudformation", tenant), client(port, "autoscaling", tenant)

    def stack_limit(c: Any) -> int:
        return next(int(l["Value"]) for l in c.describe_account_limits()["AccountLimits"] if l["Name"] == "StackLimit")

    check(stack_limit(cfn) == 2000, "CloudFormation's StackLimit is AWS's default 2000")
    limits = asg.describe_account_limits()
    check(limits["MaxNumberOfAutoScalingGroups"] == 200, f"Auto Scaling's default group limit is 200: {limits}")
    check(limits["NumberOfAutoScalingGroups"] == 0, f"a new account has no groups: {limits}")
    ec2 = client(port, "ec2", tenant)
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    asg.create_launch_configuration(LaunchConfigurationName="lc", ImageId="ami-12c6146b", InstanceType="t3.micro")
    asg.create_auto_scaling_group(AutoScalingGroupName="g", LaunchConfigurationName="lc", MinSize=0, MaxSize=0,
                                  VPCZoneIdentifier=subnet)
    limits = asg.describe_account_limits()
    check(limits["NumberOfAutoScalingGroups"] == 1 and limits["NumberOfLaunchConfigurations"] == 1,
          f"the current counts include the new group: {limits}")
    try:
        emulation(port, account_limits={tenant: {"StackLimit": 3, "MaxNumberOfAutoScalingGroups": 1}})
        check(stack_limit(cfn) == 3, "the account's StackLimit is the one set")
        check(asg.describe_account_limits()["MaxNumberOfAutoScalingGroups"] == 1, "the account's group limit is set")
        check(stack_limit(client(port, "cloudformation", other)) == 2000, "other accounts keep the defaults")
        try:
            emulation(port, account_limits={tenant: {"StackLimits": 3}})
            raise AssertionError("an unknown limit name was accepted")
        except urllib.error.HTTPError as err:
            check(err.code == 400 and b"StackLimit" in err.read(), "an unknown limit is refused naming the known ones")
    finally:
        emulation(port, account_limits={tenant: {}})
    check(stack_limit(cfn) == 2000, "an empty setting brings back the default")


def probe_terminate_detaches_interfaces(port: int) -> None:
    """A terminated instance's interface attached as device 1 is detached and ``available``, and
    another instance can attach it (correction 26)."""
    ec2 = client(port, "ec2", account())
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    eni = ec2.create_network_interface(SubnetId=subnet)["NetworkInterface"]["NetworkInterfaceId"]
    first, second = (
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet)["Instances"][0]["InstanceId"]
        for _ in range(2)
    )
    ec2.attach_network_interface(NetworkInterfaceId=eni, InstanceId=first, DeviceIndex=1)
    ec2.terminate_instances(InstanceIds=[first])
    described = ec2.describe_network_interfaces(NetworkInterfaceIds=[eni])["NetworkInterfaces"][0]
    check(described["Status"] == "available" and "Attachment" not in described,
          f"the terminated instance's interface is detached: {described.get('Status')} {described.get('Attachment')}")
    ec2.attach_network_interface(NetworkInterfaceId=eni, InstanceId=second, DeviceIndex=1)
    described = ec2.describe_network_interfaces(NetworkInterfaceIds=[eni])["NetworkInterfaces"][0]
    check(described.get("Attachment", {}).get("InstanceId") == second, "the replacement attaches the interface")


def probe_network_quotas(port: int) -> None:
    """``DescribeAccountAttributes`` and ``GetServiceQuota`` answer AWS's defaults for the
    network quotas, then an account's own (or every account's) once set (correction 27)."""
    tenant, other = account(), account()
    ec2, sq = client(port, "ec2", tenant), client(port, "service-quotas", tenant)

    def eips(c: Any) -> list[str]:
        attrs = c.describe_account_attributes(AttributeNames=["vpc-max-elastic-ips"])["AccountAttributes"]
        return [v["AttributeValue"] for a in attrs for v in a["AttributeValues"]]

    def quota(c: Any, code: str) -> float:
        return float(c.get_service_quota(ServiceCode="vpc", QuotaCode=code)["Quota"]["Value"])

    # A launcher may raise every account's quotas ("*"); without that, AWS's defaults.
    previous = emulation(port)["account_limits"]
    try:
        emulation(port, account_limits={"*": {}})
        check(eips(ec2) == ["5"], f"only the attribute asked for, AWS's default 5: {eips(ec2)}")
        check(quota(sq, "L-F678F1CE") == 5.0 and quota(sq, "L-FE5A380F") == 5.0, "AWS's default VPC and NAT quotas")
        emulation(port, account_limits={tenant: {"vpc-max-elastic-ips": 2, "L-F678F1CE": 7, "L-FE5A380F": 1}})
        check(eips(ec2) == ["2"], f"the account's Elastic IP limit: {eips(ec2)}")
        check(quota(sq, "L-F678F1CE") == 7.0 and quota(sq, "L-FE5A380F") == 1.0, "the account's quotas")
        check(eips(client(port, "ec2", other)) == ["5"], "other accounts keep the defaults")
        emulation(port, account_limits={"*": {"L-F678F1CE": 40}})
        check(quota(client(port, "service-quotas", other), "L-F678F1CE") == 40.0, "every account's setting")
        check(quota(sq, "L-F678F1CE") == 7.0, "an account's own setting wins over every account's")
    finally:
        emulation(port, account_limits={tenant: {}, "*": previous.get("*", {})})


PROBES: list[tuple[str, Callable[[int], None]]] = [
    ("termination protection", probe_termination_protection),
    ("cross-account VPC peering in a template", probe_cross_account_peering),
    ("conditional bucket-policy statements", probe_conditional_bucket_policy),
    ("a bucket policy requiring SSE-KMS refuses other uploads", probe_sse_kms_required_by_bucket_policy),
    ("AWS::EC2::VPCCidrBlock in a template", probe_vpc_cidr_block),
    ("stack delete removes the network", probe_network_stack_delete),
    ("DescribeStacks during CreateStack", probe_describe_during_create),
    ("request log", probe_request_log),
    ("stack delete removes routes and peerings", probe_route_and_peering_delete),
    ("stack update and delete revoke ingress rules", probe_ingress_rule_removed_by_update),
    ("etcd interface and volume keep their template properties", probe_interface_and_volume_properties),
    ("a resource's tags, read by id", probe_tags_by_resource),
    ("Auto Scaling lifecycle hooks", probe_lifecycle_hooks),
    ("lifecycle heartbeat timeouts and RecordLifecycleActionHeartbeat", probe_lifecycle_timeouts),
    ("a group updated in place by its stack", probe_group_updated_in_place),
    ("AutoScalingRollingUpdate", probe_rolling_update),
    ("the groups of a stack roll in DependsOn order", probe_rolls_in_depends_on_order),
    ("a stack delete drains its groups (group_deletion_hooks)", probe_group_deletion_hooks),
    ("a security group in use is not deleted", probe_security_group_in_use),
    ("a hosted zone is deleted with its stack once empty", probe_hosted_zone_deleted_with_its_stack),
    ("a stack's load balancer as its template places and tags it", probe_load_balancer_from_template),
    ("stack drift detection", probe_drift_detection),
    ("ExecuteChangeSet updates a stack as UpdateStack does", probe_execute_change_set),
    ("new buckets refuse ACLs (BucketOwnerEnforced)", probe_bucket_owner_enforced),
    ("a key policy governs reading the key", probe_kms_key_policy_reads),
    ("throttling", probe_throttling),
    ("DescribeAccountLimits of CloudFormation and Auto Scaling", probe_account_limits),
    ("network quotas: DescribeAccountAttributes and GetServiceQuota", probe_network_quotas),
    ("AssumeRoleWithWebIdentity checks the token as STS does", probe_web_identity),
    ("CloudFront deploys, deletes only disabled distributions, serves issuers from its origin", probe_cloudfront),
    ("a terminated instance lets go of its other interfaces", probe_terminate_detaches_interfaces),
]



def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print(f"usage: {argv[0]} PORT", file=sys.stderr)
        return 2
    port = int(argv[1])
    failures = 0
    for name, probe in PROBES:
        try:
            probe(port)
            print(f"ok    {name}")
        except Exception as err:  # noqa: BLE001 - every failure is reported, then counted
            failures += 1
            print(f"FAIL  {name}: {type(err).__name__}: {err}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
