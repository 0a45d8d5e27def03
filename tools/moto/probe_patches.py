#!/usr/bin/env python3
"""Demonstrates each correction of ``tools/moto/server.py`` against a running server.

Usage::

    python tools/moto/probe_patches.py PORT

Exits 0 when every correction behaves like AWS, 1 (listing the failures) otherwise. Each probe
works in accounts of its own, chosen at random, so it can run against a shared server.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
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


PROBES: list[tuple[str, Callable[[int], None]]] = [
    ("termination protection", probe_termination_protection),
    ("cross-account VPC peering in a template", probe_cross_account_peering),
    ("conditional bucket-policy statements", probe_conditional_bucket_policy),
    ("AWS::EC2::VPCCidrBlock in a template", probe_vpc_cidr_block),
    ("stack delete removes the network", probe_network_stack_delete),
    ("DescribeStacks during CreateStack", probe_describe_during_create),
    ("request log", probe_request_log),
    ("stack delete removes routes and peerings", probe_route_and_peering_delete),
    ("stack update and delete revoke ingress rules", probe_ingress_rule_removed_by_update),
    ("etcd interface and volume keep their template properties", probe_interface_and_volume_properties),
    ("a resource's tags, read by id", probe_tags_by_resource),
    ("a security group in use is not deleted", probe_security_group_in_use),
    ("a hosted zone is deleted with its stack once empty", probe_hosted_zone_deleted_with_its_stack),
    ("a stack's load balancer as its template places and tags it", probe_load_balancer_from_template),
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
