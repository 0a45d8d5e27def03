#!/usr/bin/env python3
"""moto, the AWS emulator, on loopback for the test suites, with nine behaviours and one cost corrected.

Usage::

    python tools/moto/server.py --host 127.0.0.1 --port 0 --port-file PATH

Binds ``--host`` on ``--port`` (0 picks a free port), writes the bound port to ``--port-file``
(atomically, once the socket accepts connections) and serves until its parent goes away: the
process exits when its stdin reaches end-of-file (the parent holds the write end of a pipe, so
this happens however the parent dies) or when its parent process id changes (the parent died and
the process was re-parented). Tests therefore never leak servers.

moto 5.2.5 differs from AWS in ways that would make an operator test either fail for the wrong
reason or pass without exercising the real code path. Nine of them are corrected here, each by a
small monkeypatch that names the moto behaviour it replaces:

1. CloudFormation termination protection: ``UpdateTerminationProtection`` is implemented and
   ``DeleteStack`` refuses a protected stack with AWS's ``ValidationError``.
2. ``AWS::EC2::VPCPeeringConnection`` honours ``PeerOwnerId``/``PeerRegion``, so a stack in a
   tenant account can peer with a VPC of the management account.
3. S3 bucket policies: statements carrying a ``Condition`` are not applied. moto does not evaluate
   conditions faithfully (a ``Deny`` on ``aws:SecureTransport = false`` denies *every* request), so
   the emulator does not evaluate conditional statements at all. Unconditional statements still
   apply.
4. ``AWS::EC2::VPCCidrBlock`` is implemented (moto skips the type): a node-pool stack can add its
   CIDR as a secondary VPC block and create subnets in it; deleting the stack disassociates it.
5. Stack deletion removes route tables, VPC endpoints, NAT gateways, Elastic IPs, internet
   gateways (detached first) and subnet route-table associations, which moto leaves behind; the
   leftover route tables made every VPC stack delete fail with ``DependencyViolation`` while the
   stack record vanished and its resources leaked.
6. A resource first reached through a ``Ref`` or ``GetAtt`` is created after its ``DependsOn``
   targets, as CloudFormation does.
7. CloudFormation requests are served one at a time: a DescribeStacks during a CreateStack no
   longer creates a second copy of every resource an output references.
8. Stack deletion (and an update dropping the resource) removes ``AWS::EC2::Route`` from its
   route table, deletes ``AWS::EC2::VPCPeeringConnection`` and revokes
   ``AWS::EC2::SecurityGroupIngress``; left behind, a re-created cluster's routes failed with
   ``RouteAlreadyExists``, and a removed node pool's peer rules stayed.
9. ``AWS::EC2::NetworkInterface`` and ``AWS::EC2::Volume`` keep their template's tags, security
   groups and volume settings, so a master's etcd interface and volume can be found by tag,
   and the volume is deleted with its stack.

One correction is of cost, not behaviour:

10. An EC2 resource's own tags are read from the account's tag table by its id. moto scanned
    every tag of the account, with a regular expression per tag, for each resource it described
    or filtered, so one ``DescribeInstances`` with a tag filter cost instances × tags: with a
    hundred clusters in one account, seconds per call, and a benchmark measured moto instead of
    the operator. AWS's cost does not grow with unrelated resources. The answer is unchanged.

Three more behaviours, corrected after the cost one:

11. ``DeleteSecurityGroup`` refuses, with ``DependencyViolation``, a group that a network
    interface, a load balancer or another group's rule still uses, as AWS does.
12. ``AWS::Route53::HostedZone`` is deleted with its stack, and refused (``HostedZoneNotEmpty``,
    failing the stack's deletion) while records other than its ``NS`` and ``SOA`` remain.
13. A stack's classic load balancer is placed in its template's subnets with its security groups
    and tags, and a stack's load balancers and target groups carry the stack's tags, as
    CloudFormation puts them on every resource that takes tags.

Besides the corrections, the server keeps a log of every request with the access key that sent
it (``GET /moto-api/request-log``, see ``RequestLog``), so that tests can tell callers apart.

Every patch first checks that the moto internals it replaces still exist and raises at start-up
otherwise (``PatchError``): a moto upgrade that moves them breaks the launcher loudly instead of
silently dropping a correction.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import stat
import sys
import threading
import time
from typing import Any


class PatchError(RuntimeError):
    """moto's internals no longer look the way a patch expects."""


def _require_no_stack_delete(classes: dict[str, Any]) -> None:
    """Refuse to patch a resource type that moto itself now deletes with its stack."""
    for name, cls in classes.items():
        abstract = getattr(cls.delete_from_cloudformation_json, "__isabstractmethod__", False)
        if hasattr(cls, "delete") or not abstract:
            raise PatchError(
                f"moto now deletes {name} with its stack; review tools/moto/server.py "
                "against the installed moto version"
            )


def _require(owner: Any, name: str) -> Any:
    """Return ``owner.name`` or fail start-up naming what moved."""
    if not hasattr(owner, name):
        raise PatchError(
            f"moto internals changed: {getattr(owner, '__name__', owner)!r} has no {name!r}; "
            "review tools/moto/server.py against the installed moto version"
        )
    return getattr(owner, name)


# --- 1. CloudFormation termination protection -------------------------------------------------


def patch_termination_protection() -> None:
    """moto 5.2.5 stores ``EnableTerminationProtection`` from CreateStack but answers
    ``UpdateTerminationProtection`` with 500 NotImplementedError and lets ``DeleteStack`` delete a
    protected stack. AWS flips the flag (returning the StackId) and refuses the delete with
    400 ``ValidationError: Stack [<name>] cannot be deleted while TerminationProtection is
    enabled``."""
    from moto.cloudformation import responses as cfn_responses
    from moto.cloudformation.exceptions import ValidationError
    from moto.core.responses import ActionResult

    response_cls = _require(cfn_responses, "CloudFormationResponse")
    original_delete = _require(response_cls, "delete_stack")
    backend_cls = _require(cfn_responses, "CloudFormationBackend")
    _require(backend_cls, "get_stack")

    def live_stack(backend: Any, name_or_id: str) -> Any:
        """The undeleted stack with this name or id, if any (deleted stacks stay in
        ``deleted_stacks`` and are looked up by id only)."""
        for stack in backend.stacks.values():
            if name_or_id in (stack.stack_id, stack.name):
                return stack
        return None

    def update_termination_protection(self: Any) -> Any:
        name_or_id = self._get_param("StackName")
        enable = self._get_param("EnableTerminationProtection")
        if isinstance(enable, str):
            enable = enable.lower() == "true"
        stack = live_stack(self.cloudformation_backend, name_or_id)
        if stack is None:
            raise ValidationError(name_or_id)
        stack.enable_termination_protection = bool(enable)
        return ActionResult({"StackId": stack.stack_id})

    def delete_stack(self: Any) -> Any:
        name_or_id = self._get_param("StackName")
        stack = live_stack(self.cloudformation_backend, name_or_id)
        if stack is not None and getattr(stack, "enable_termination_protection", False):
            raise ValidationError(
                message=f"Stack [{stack.name}] cannot be deleted while TerminationProtection is enabled"
            )
        return original_delete(self)

    # moto dispatches an action to the response method of the same snake_case name, found
    # among the class's functions (``method_names_from_class``): a plain function attribute.
    response_cls.update_termination_protection = update_termination_protection
    response_cls.delete_stack = delete_stack


# --- 2. Cross-account VPC peering in templates -------------------------------------------------


def patch_vpc_peering_cloudformation() -> None:
    """moto 5.2.5 resolves ``PeerVpcId`` of an ``AWS::EC2::VPCPeeringConnection`` in the stack's
    own account and region, ignoring ``PeerOwnerId``/``PeerRegion``, so a tenant-account stack
    cannot peer with a management-account VPC (``InvalidVpcID.NotFound``). The plain EC2 API
    already honours both; the template path now does the same. It also applies the resource's
    ``Tags`` (ignored by moto) and accepts the connection when AWS would accept it on creation:
    the peer is in the same account, or ``PeerRoleArn`` names the role CloudFormation assumes
    in the peer account to accept it."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models import vpc_peering_connections as pcx_module

    pcx_cls = _require(pcx_module, "VPCPeeringConnection")
    _require(pcx_cls, "create_from_cloudformation_json")
    status_cls = _require(pcx_module, "PeeringConnectionStatus")
    _require(status_cls, "accept")

    def create_from_cloudformation_json(
        cls: Any,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        properties = cloudformation_json["Properties"]
        peer_account = str(properties.get("PeerOwnerId") or account_id)
        peer_region = str(properties.get("PeerRegion") or region_name)

        ec2_backend = ec2_backends[account_id][region_name]
        vpc = ec2_backend.get_vpc(properties["VpcId"])
        peer_vpc = ec2_backends[peer_account][peer_region].get_vpc(properties["PeerVpcId"])
        tags = {t["Key"]: t["Value"] for t in properties.get("Tags", []) or []}

        vpc_pcx = ec2_backend.create_vpc_peering_connection(vpc, peer_vpc, tags)
        if peer_account == account_id or properties.get("PeerRoleArn"):
            vpc_pcx._status.accept()
        return vpc_pcx

    pcx_cls.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)


# --- 3. Conditional statements in S3 bucket policies -------------------------------------------


def patch_bucket_policy_conditions() -> None:
    """moto 5.2.5 evaluates a statement's ``Condition`` against request values it never
    collects, and a failed condition check yields DENIED whatever the statement's effect. A
    TLS-only policy (Deny ``s3:*`` when ``aws:SecureTransport`` is ``false``) therefore denies
    every object request, including the HTTPS-equivalent ones a test makes, and every upload after
    such a policy fails with 403. The emulator now ignores statements that carry a ``Condition``:
    conditions are not evaluated, unconditional Allow/Deny statements still are."""
    from moto.iam.access_control import IAMPolicy, PermissionResult
    from moto.s3 import models as s3_models

    bucket_cls = _require(s3_models, "FakeBucket")
    _require(bucket_cls, "get_permission")
    _require(IAMPolicy, "is_action_permitted")

    def get_permission(self: Any, action: str, resource: str) -> Any:
        if self.policy is None:
            return PermissionResult.NEUTRAL
        document = json.loads(self.policy)
        statements = document.get("Statement", [])
        if isinstance(statements, dict):
            statements = [statements]
        unconditional = [s for s in statements if "Condition" not in s]
        if not unconditional:
            return PermissionResult.NEUTRAL
        document["Statement"] = unconditional
        return IAMPolicy(json.dumps(document)).is_action_permitted(action, resource)

    bucket_cls.get_permission = get_permission


# --- 4. AWS::EC2::VPCCidrBlock in templates -----------------------------------------------------


def patch_vpc_cidr_block_cloudformation() -> None:
    """moto 5.2.5 has no model for ``AWS::EC2::VPCCidrBlock``: the parser logs "No Moto
    CloudFormation support" and skips it, so a subnet inside the secondary block fails with
    ``InvalidSubnet.Range`` and the stack stays in CREATE_IN_PROGRESS. AWS associates the block
    with the VPC (``Ref`` and ``GetAtt Id`` are the association id) and disassociates it when the
    resource is deleted. The emulator now does the same through the EC2 backend's
    AssociateVpcCidrBlock/DisassociateVpcCidrBlock path, which also adds (and removes) the block's
    ``local`` route in the VPC's route tables. After disassociating, the association is dropped
    from the VPC rather than kept as ``disassociated``: moto still validates subnets against
    disassociated blocks, and AWS stops listing them shortly after."""
    from moto.cloudformation import parsing
    from moto.core.common_models import CloudFormationModel
    from moto.ec2.models import ec2_backends
    from moto.ec2.models import vpcs as vpcs_module

    vpc_cls = _require(vpcs_module, "VPC")
    _require(vpc_cls, "associate_vpc_cidr_block")
    backend_cls = _require(vpcs_module, "VPCBackend")
    _require(backend_cls, "associate_vpc_cidr_block")
    _require(backend_cls, "disassociate_vpc_cidr_block")
    # moto finds CloudFormation types among the direct subclasses of CloudFormationModel and
    # caches the result; all three caches are cleared once the new type exists.
    caches = [
        _require(parsing, name)
        for name in ("get_model_list", "get_model_map", "get_name_type_map")
    ]
    if "AWS::EC2::VPCCidrBlock" in parsing.get_model_map():
        raise PatchError(
            "moto now models AWS::EC2::VPCCidrBlock itself; review tools/moto/server.py "
            "against the installed moto version"
        )

    class VPCCidrBlock(CloudFormationModel):
        """A secondary IPv4 (or Amazon-provided IPv6) block associated with a VPC."""

        # moto's model registry files a model under the second component of its module name.
        __module__ = "moto.ec2.models.vpcs"

        def __init__(
            self, account_id: str, region_name: str, vpc_id: str, association: dict[str, Any]
        ):
            self.account_id = account_id
            self.region_name = region_name
            self.vpc_id = vpc_id
            self.association_id = str(association["association_id"])
            self.cidr_block = str(association["cidr_block"])

        @staticmethod
        def cloudformation_name_type() -> str:
            return ""

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::EC2::VPCCidrBlock"

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return attr in ("Id", "VpcId")

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

            if attribute_name == "Id":
                return self.association_id
            if attribute_name == "VpcId":
                return self.vpc_id
            raise UnformattedGetAttTemplateException()

        @property
        def physical_resource_id(self) -> str:
            return self.association_id

        def is_created(self) -> bool:
            return True

        @classmethod
        def create_from_cloudformation_json(  # type: ignore[override]
            cls,
            resource_name: str,
            cloudformation_json: Any,
            account_id: str,
            region_name: str,
            **kwargs: Any,
        ) -> "VPCCidrBlock":
            properties = cloudformation_json["Properties"]
            vpc_id = str(properties["VpcId"])
            ipv6 = str(properties.get("AmazonProvidedIpv6CidrBlock", "false")).lower() == "true"
            if not ipv6 and not properties.get("CidrBlock"):
                from moto.cloudformation.exceptions import ValidationError

                # BYOIP pools (Ipv4IpamPoolId, Ipv6CidrBlock, Ipv6Pool) are not emulated.
                raise ValidationError(
                    resource_name,
                    message="AWS::EC2::VPCCidrBlock needs CidrBlock or "
                    "AmazonProvidedIpv6CidrBlock in this emulator",
                )
            association = ec2_backends[account_id][region_name].associate_vpc_cidr_block(
                vpc_id, None if ipv6 else properties.get("CidrBlock"), ipv6
            )
            return cls(account_id, region_name, vpc_id, association)

        def delete(self, account_id: str, region_name: str) -> None:
            backend = ec2_backends[account_id][region_name]
            vpc = backend.vpcs.get(self.vpc_id)
            if vpc is None:
                # Gone with its VPC: CloudFormation treats a missing resource as deleted.
                return
            associations = getattr(vpc, "_cidr_block_association_set", None)
            if associations is None:
                # Not an AttributeError: moto's stack delete would take that for "no delete
                # method" and drop the resource silently.
                raise PatchError("moto internals changed: VPC has no _cidr_block_association_set")
            if self.association_id not in associations:
                return
            backend.disassociate_vpc_cidr_block(self.association_id)
            associations.pop(self.association_id, None)

    for cache in caches:
        cache.cache_clear()
    if parsing.get_model_map().get("AWS::EC2::VPCCidrBlock") is not VPCCidrBlock:
        raise PatchError("AWS::EC2::VPCCidrBlock did not register with moto's template parser")


# --- 5. Deleting network resources with their stack ---------------------------------------------


def patch_network_resource_deletion() -> None:
    """moto 5.2.5 has no delete for ``AWS::EC2::RouteTable``, ``VPCEndpoint``, ``NatGateway``,
    ``EIP``, ``InternetGateway``, ``VPCGatewayAttachment`` and ``SubnetRouteTableAssociation``:
    the stack delete skips them silently. The extra route tables then make the VPC delete fail
    with ``DependencyViolation``, ``DeleteStack`` reports that error, the stack record is gone
    anyway and the VPC, gateways, endpoint and addresses leak. AWS deletes all of them. Each
    type now gets the ``delete(account_id, region_name)`` moto's stack delete calls first (as
    ``SecurityGroup`` has), doing what the EC2 API does for it. moto retries deletes that raise
    until no progress is made, so a resource whose dependants still exist (an attached internet
    gateway) goes in a later pass, as in CloudFormation's reverse dependency order. A resource
    that is already gone counts as deleted, as in CloudFormation."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models import elastic_ip_addresses, internet_gateways, nat_gateways
    from moto.ec2.models import route_tables, subnets, vpcs, vpn_gateway
    from moto.ec2 import utils as ec2_utils

    route_id = _require(ec2_utils, "generate_route_id")

    classes = {
        "RouteTable": _require(route_tables, "RouteTable"),
        "VPCEndPoint": _require(vpcs, "VPCEndPoint"),
        "NatGateway": _require(nat_gateways, "NatGateway"),
        "ElasticAddress": _require(elastic_ip_addresses, "ElasticAddress"),
        "InternetGateway": _require(internet_gateways, "InternetGateway"),
        "VPCGatewayAttachment": _require(vpn_gateway, "VPCGatewayAttachment"),
        "SubnetRouteTableAssociation": _require(subnets, "SubnetRouteTableAssociation"),
    }
    _require_no_stack_delete(classes)

    def delete_route_table(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        if self.id in backend.route_tables:
            # Refuses (DependencyViolation) while API-made subnet associations remain, as AWS.
            backend.delete_route_table(self.id)

    def delete_vpc_endpoint(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        endpoint = backend.vpc_end_points.get(self.id)
        if endpoint is None or endpoint.state == "deleted":
            return
        # moto's DeleteVpcEndpoints removes the prefix-list route from every listed route table
        # and fails on one that is already gone; the stack may have deleted those first.
        prefix_list = endpoint.destination_prefix_list_id
        endpoint.route_table_ids = [
            rtb
            for rtb in endpoint.route_table_ids or []
            if rtb in backend.route_tables
            and any(r.id == route_id(rtb, prefix_list) for r in backend.route_tables[rtb].routes)
        ]
        backend.delete_vpc_endpoints([self.id])

    def delete_nat_gateway(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        if self.state == "deleted":
            return
        backend.delete_nat_gateway(self.id)
        # AWS releases the gateway's network interface, which disassociates its address.
        for address in list(backend.addresses):
            if address.eni is not None and address.eni is getattr(self, "_eni", None):
                backend.disassociate_address(address=address.public_ip)

    def delete_address(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        if self in backend.addresses:
            backend.release_address(address=self.public_ip)

    def delete_internet_gateway(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        if self.id in backend.internet_gateways:
            # Refuses (DependencyViolation) while attached; the attachment goes first.
            backend.delete_internet_gateway(self.id)

    def delete_gateway_attachment(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        gateway_id = self.gateway_id or ""
        # moto records the gateway only for internet gateways; a VPN gateway attachment keeps
        # moto's behaviour (left attached).
        if not gateway_id.startswith("igw-"):
            return
        igw = backend.internet_gateways.get(gateway_id)
        if igw is not None and igw.vpc is not None and igw.vpc.id == self.vpc_id:
            backend.detach_internet_gateway(gateway_id, self.vpc_id)

    def delete_subnet_association(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        backend.subnet_associations.pop(f"{self.route_table_id}:{self.subnet_id}", None)

    classes["RouteTable"].delete = delete_route_table
    classes["VPCEndPoint"].delete = delete_vpc_endpoint
    classes["NatGateway"].delete = delete_nat_gateway
    classes["ElasticAddress"].delete = delete_address
    classes["InternetGateway"].delete = delete_internet_gateway
    classes["VPCGatewayAttachment"].delete = delete_gateway_attachment
    classes["SubnetRouteTableAssociation"].delete = delete_subnet_association


# --- 6. DependsOn honoured when a resource is created through a reference ----------------------


def patch_depends_on_for_references() -> None:
    """moto creates resources in DependsOn order, but a resource first reached through a ``Ref``
    or ``GetAtt`` of another resource is created on the spot, before its own DependsOn targets
    (``ResourceMap.__getitem__`` ignores them). A node-pool Auto Scaling group that lists subnets
    created in a secondary VPC block then creates those subnets before the block exists, and
    CloudFormation fails with ``InvalidSubnet.Range``. Create the DependsOn targets first, as
    CloudFormation does."""
    from moto.cloudformation import parsing

    resource_map = getattr(parsing, "ResourceMap", None)
    original = getattr(resource_map, "__getitem__", None) if resource_map else None
    if original is None:
        raise PatchError("moto internals changed: ResourceMap.__getitem__ not found")

    def getitem(self, key):  # type: ignore[no-untyped-def]
        parsed = getattr(self, "_parsed_resources", {})
        json_map = getattr(self, "_resource_json_map", {}) or {}
        if key not in parsed and isinstance(json_map.get(key), dict):
            deps = json_map[key].get("DependsOn", [])
            if isinstance(deps, str):
                deps = [deps]
            for dep in deps:
                if dep in json_map and dep not in parsed and dep != key:
                    original(self, dep)
        return original(self, key)

    resource_map.__getitem__ = getitem


# --- 7. CloudFormation requests one at a time ------------------------------------------------


def patch_serial_cloudformation() -> None:
    """moto's CloudFormation backend is not safe for concurrent requests. CreateStack makes the
    stack visible before it creates the resources, and a DescribeStacks arriving meanwhile
    evaluates the stack's outputs: an output that references a resource not created yet creates
    it on the spot (``ResourceMap.__getitem__``) while the creating thread creates it too. A node
    pool stack whose outputs name its Auto Scaling group then owns two groups, one of them
    orphaned. AWS never does this. Serve CloudFormation requests one at a time (one lock per
    server; moto holds the interpreter lock for its work anyway), so a DescribeStacks waits for
    the creation it would have raced."""
    from moto.cloudformation import responses as cfn_responses

    response_cls = _require(cfn_responses, "CloudFormationResponse")
    original = _require(response_cls, "call_action")
    lock = threading.RLock()

    def call_action(self: Any) -> Any:
        with lock:
            return original(self)

    response_cls.call_action = call_action


# --- 8. Routes, peerings and ingress rules deleted with their stack -----------------------------


def patch_route_and_peering_deletion() -> None:
    """moto 5.2.5 has no delete for ``AWS::EC2::Route``, ``AWS::EC2::VPCPeeringConnection`` and
    ``AWS::EC2::SecurityGroupIngress``: the stack delete, and a stack update that drops one of
    them, skip them silently. A route added by a stack to a route table the stack does not own
    (TCCPF's and TCNPF's routes in the management VPC) outlives the stack, and creating the same
    stack again fails with ``RouteAlreadyExists``; the peering stays ``active``; an ingress rule
    added to a group the stack does not own (a node pool's rule for a removed peer pool) stays.
    AWS removes the route from its table, deletes the peering (state ``deleted``) and revokes the
    rule. The three types now get the ``delete(account_id, region_name)`` moto calls on stack
    delete and on update removal, doing what ``DeleteRoute``, ``DeleteVpcPeeringConnection`` and
    ``RevokeSecurityGroupIngress`` do. What is already gone counts as deleted, as in
    CloudFormation."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models import route_tables, security_groups, vpc_peering_connections
    from moto.ec2.exceptions import EC2ClientError

    classes = {
        "Route": _require(route_tables, "Route"),
        "VPCPeeringConnection": _require(vpc_peering_connections, "VPCPeeringConnection"),
        "SecurityGroupIngress": _require(security_groups, "SecurityGroupIngress"),
    }
    _require_no_stack_delete(classes)

    def delete_route(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        table = backend.route_tables.get(self.route_table.id)
        if table is not None:
            table._routes.pop(self.id, None)

    def delete_peering(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        if self.id in backend.vpc_pcxs and self._status.code != "deleted":
            backend.delete_vpc_peering_connection(self.id)

    def delete_ingress(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        p = self.properties
        source = {}
        if p.get("SourceSecurityGroupId"):
            source["GroupId"] = p["SourceSecurityGroupId"]
        if p.get("SourceSecurityGroupName"):
            source["GroupName"] = p["SourceSecurityGroupName"]
        ip_ranges = [{"CidrIp": p["CidrIp"], "Description": p.get("Description")}] if p.get("CidrIp") else []
        try:
            backend.revoke_security_group_ingress(
                group_name_or_id=self.security_group.id,
                ip_protocol=p.get("IpProtocol"),
                from_port=p.get("FromPort"),
                to_port=p.get("ToPort"),
                ip_ranges=ip_ranges,
                source_groups=[source] if source else [],
            )
        except EC2ClientError:
            pass  # the group or the rule is already gone

    classes["Route"].delete = delete_route
    classes["VPCPeeringConnection"].delete = delete_peering
    classes["SecurityGroupIngress"].delete = delete_ingress


# --- 9. The etcd interface and volume as the template declares them -----------------------------


def patch_interface_and_volume_cloudformation() -> None:
    """moto 5.2.5 creates ``AWS::EC2::NetworkInterface`` and ``AWS::EC2::Volume`` from a template
    with almost none of their properties: the interface gets no ``Tags`` and no ``GroupSet``
    (moto reads ``SecurityGroups``, which the resource type does not have), the volume no
    ``Tags``, ``VolumeType``, ``Encrypted``, ``Iops``, ``Throughput`` or ``SnapshotId``. A master
    finds its etcd interface and volume by their ``Name`` tag at boot, so without the tags they
    cannot be found through ``DescribeNetworkInterfaces``/``DescribeVolumes`` filters, as they can
    in AWS. Both are now created with the properties the AWS resource reference documents. And
    the volume, which moto left behind, is deleted with its stack (its default deletion policy
    is ``Delete``); an attached volume fails the delete with ``VolumeInUse``, as in AWS."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models import elastic_block_store, elastic_network_interfaces

    eni_cls = _require(elastic_network_interfaces, "NetworkInterface")
    volume_cls = _require(elastic_block_store, "Volume")
    _require(eni_cls, "create_from_cloudformation_json")
    _require(volume_cls, "create_from_cloudformation_json")

    def tags_of(properties: dict[str, Any]) -> dict[str, str]:
        return {t["Key"]: t["Value"] for t in properties.get("Tags", []) or []}

    def create_interface(
        cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        properties = cloudformation_json["Properties"]
        backend = ec2_backends[account_id][region_name]
        subnet = backend.get_subnet(properties["SubnetId"]) if properties.get("SubnetId") else None
        return backend.create_network_interface(
            subnet,
            properties.get("PrivateIpAddress"),
            group_ids=list(properties.get("GroupSet", []) or []),
            description=properties.get("Description"),
            tags=tags_of(properties),
        )

    def create_volume(
        cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        properties = cloudformation_json["Properties"]
        backend = ec2_backends[account_id][region_name]
        encrypted = str(properties.get("Encrypted", False)).lower() == "true"
        volume = backend.create_volume(
            size=int(properties["Size"]) if properties.get("Size") is not None else None,
            zone_name=properties["AvailabilityZone"],
            snapshot_id=properties.get("SnapshotId"),
            encrypted=encrypted,
            kms_key_id=properties.get("KmsKeyId"),
            volume_type=properties.get("VolumeType"),
            iops=int(properties["Iops"]) if properties.get("Iops") is not None else None,
            throughput=int(properties["Throughput"]) if properties.get("Throughput") is not None else None,
        )
        volume.add_tags(tags_of(properties))
        return volume

    def delete_volume(self: Any, account_id: str, region_name: str) -> None:
        backend = ec2_backends[account_id][region_name]
        if self.id in backend.volumes:
            backend.delete_volume(self.id)  # VolumeInUse while attached, as in AWS

    _require_no_stack_delete({"Volume": volume_cls})
    eni_cls.create_from_cloudformation_json = classmethod(create_interface)
    volume_cls.create_from_cloudformation_json = classmethod(create_volume)
    volume_cls.delete = delete_volume


# --- 10. A resource's own tags by id, not by scanning the account's tags -------------------------


def patch_tag_lookup() -> None:
    """``TaggedEC2Resource.get_tags`` asks ``describe_tags(filters={"resource-id": [id]})``, which
    walks every tag of the account and matches each with a regular expression built from the id.
    An id holds no wildcard, so the expression matches that id exactly (``fnmatch`` anchors it),
    and the result is the resource's own entry of the tag table, in insertion order. Read that
    entry directly; ids with wildcard characters (none are issued) keep moto's path."""
    from moto.ec2.models import core as ec2_core
    from moto.ec2 import utils as ec2_utils

    resource_cls = _require(ec2_core, "TaggedEC2Resource")
    original = _require(resource_cls, "get_tags")
    prefix_to_type = _require(ec2_utils, "EC2_PREFIX_TO_RESOURCE")
    get_prefix = _require(ec2_utils, "get_prefix")

    def get_tags(self: Any) -> list[dict[str, str]]:
        resource_id = getattr(self, "id", None)
        if not resource_id or any(c in resource_id for c in "*?["):
            return original(self)
        tags = self.ec2_backend.tags.get(resource_id, {})
        resource_type = prefix_to_type.get(get_prefix(resource_id), "")
        return [
            {"resource_id": resource_id, "key": key, "value": value, "resource_type": resource_type}
            for key, value in tags.items()
        ]

    resource_cls.get_tags = get_tags


# --- 11. A security group in use can not be deleted ----------------------------------------------


def patch_security_group_in_use() -> None:
    """moto 5.2.5 deletes a security group through ``DeleteSecurityGroup`` whatever still uses
    it. AWS refuses with ``DependencyViolation`` while a network interface carries the group
    (an instance's, a load balancer's), a classic or v2 load balancer names it, or a rule of
    another group references it; the teardown of a cluster retries such deletions on a later
    reconcile, which needs the refusal to be tested. The check is made on the API only: stack
    deletions (which delete a stack's groups through the model, in moto's own order) are
    unchanged."""
    from moto.ec2.exceptions import DependencyViolationError
    from moto.ec2.responses import security_groups as sg_responses
    from moto.elb.models import elb_backends
    from moto.elbv2.models import elbv2_backends

    responses_cls = _require(sg_responses, "SecurityGroups")
    original = _require(responses_cls, "delete_security_group")

    def users_of(backend: Any, account_id: str, region: str, group: Any) -> list[str]:
        users = [eni.id for eni in list(backend.enis.values()) if any(g.id == group.id for g in eni.group_set)]
        users += [lb.name for lb in elb_backends[account_id][region].load_balancers.values()
                  if group.id in (lb.security_groups or [])]
        users += [lb.name for lb in elbv2_backends[account_id][region].load_balancers.values()
                  if group.id in (getattr(lb, "security_groups", None) or [])]
        for groups in list(backend.groups.values()):
            for other in list(groups.values()):
                if other.id == group.id:
                    continue
                for rule in list(other.ingress_rules) + list(other.egress_rules):
                    # A rule names one source group (``SecurityGroupRule``) or several (a view).
                    sources = getattr(rule, "source_groups", None) or [getattr(rule, "source_group", None) or {}]
                    if any(source.get("GroupId") == group.id for source in sources):
                        users.append(other.id)
                        break
        return users

    def delete_security_group(self: Any) -> Any:
        wanted = self._get_param("GroupId") or self._get_param("GroupName")
        group = self.ec2_backend.get_security_group_by_name_or_id(wanted) if wanted else None
        if group is not None:
            users = users_of(self.ec2_backend, self.current_account, self.region, group)
            if users:
                raise DependencyViolationError(f"resource {group.id} has a dependent object ({', '.join(users)})")
        return original(self)

    responses_cls.delete_security_group = delete_security_group


# --- 12. A hosted zone is deleted with its stack, once it is empty -------------------------------


def patch_hosted_zone_deletion() -> None:
    """moto 5.2.5 leaves an ``AWS::Route53::HostedZone`` behind when its stack is deleted (the
    model has no ``delete``, and the generic fallback does nothing). AWS deletes the zone, and
    fails the stack's deletion with ``HostedZoneNotEmpty`` while the zone holds records other
    than its own ``NS`` and ``SOA`` (records others wrote into it, such as external-dns's), which
    is why a cluster's teardown deletes those records first. The zone is now deleted through the
    backend's ``DeleteHostedZone``, which refuses a zone with records exactly so; moto retries a
    refused resource after the stack's other resources (its record sets) are gone."""
    from moto.route53 import models as route53_models
    from moto.utilities.utils import get_partition

    zone_cls = _require(route53_models, "FakeZone")
    backends = _require(route53_models, "route53_backends")
    _require(backends, "__getitem__")
    _require_no_stack_delete({"HostedZone": zone_cls})

    def delete(self: Any, account_id: str, region_name: str) -> None:
        backend = backends[account_id][get_partition(region_name)]
        if self.resource_id in backend.zones:
            backend.delete_hosted_zone(self.resource_id)  # HostedZoneNotEmpty, as in AWS

    zone_cls.delete = delete


# --- 13. A stack's load balancers where and as the template puts them -------------------------


def patch_load_balancer_cloudformation() -> None:
    """moto 5.2.5 creates an ``AWS::ElasticLoadBalancing::LoadBalancer`` from a template without
    its ``Subnets``, ``SecurityGroups`` and ``Tags``: the load balancer lands in no VPC, with a
    security group moto makes up in the default VPC, and untagged. And CloudFormation copies a
    stack's tags (with its own ``aws:cloudformation:stack-name``, ``stack-id`` and
    ``logical-id``) onto every resource that takes tags, which moto does for EC2 resources only:
    a stack's classic and v2 load balancers and target groups get none. The cluster stacks' tags
    include ``kubernetes.io/cluster/<id>=owned``, the tag the cloud provider puts on the load
    balancers of a cluster's Services, so without both corrections a test could not tell whether
    the teardown leaves the stack's own load balancers in the cluster's VPC alone. A classic load
    balancer now gets the template's subnets (and their VPC and zones), security groups and tags,
    and after each stack create or update the stack's load balancers and target groups carry the
    stack's tags as in AWS (template tags win)."""
    from moto.cloudformation import parsing
    from moto.ec2.models import ec2_backends
    from moto.elb.models import LoadBalancer as ClassicLoadBalancer
    from moto.elbv2.models import FakeLoadBalancer, FakeTargetGroup, elbv2_backends

    resource_map_cls = _require(parsing, "ResourceMap")
    original_create = _require(resource_map_cls, "create")
    original_update = _require(resource_map_cls, "update")
    original_from_template = _require(ClassicLoadBalancer, "create_from_cloudformation_json").__func__

    def create_classic(
        cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        lb = original_from_template(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        properties = cloudformation_json["Properties"]
        ec2 = ec2_backends[account_id][region_name]
        subnets = [ec2.get_subnet(s) for s in properties.get("Subnets", []) or []]
        if subnets:
            lb.subnets = [s.id for s in subnets]
            lb.vpc_id = subnets[0].vpc_id
            lb.availability_zones = sorted({s.availability_zone for s in subnets})
        groups = list(properties.get("SecurityGroups", []) or [])
        if groups:
            made_up = [g for g in lb.security_groups if g not in groups]
            lb.security_groups = groups
            for group_id in made_up:
                ec2.delete_security_group(group_id=group_id)
        lb.tags.update({t["Key"]: t["Value"] for t in properties.get("Tags", []) or []})
        return lb

    def tag_load_balancers(resource_map: Any) -> None:
        stack_tags = {k: v for k, v in resource_map.tags.items() if k != "aws:cloudformation:logical-id"}
        for logical_id, resource in list(resource_map._parsed_resources.items()):
            tags = dict(stack_tags, **{"aws:cloudformation:logical-id": logical_id})
            if isinstance(resource, ClassicLoadBalancer):
                # Directly: moto's ``add_tag`` caps a classic load balancer at 10 tags, AWS at 50.
                for key, value in tags.items():
                    resource.tags.setdefault(key, value)
            elif isinstance(resource, (FakeLoadBalancer, FakeTargetGroup)):
                arn = resource.arn
                backend = elbv2_backends[resource_map._account_id][resource_map._region_name]
                own = backend.tagging_service.get_tag_dict_for_resource(arn)
                missing = [{"Key": k, "Value": v} for k, v in tags.items() if k not in own]
                if missing:
                    backend.tagging_service.tag_resource(arn, missing)

    def create(self: Any, template: dict[str, Any]) -> bool:
        ready = original_create(self, template)
        tag_load_balancers(self)
        return ready

    def update(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original_update(self, *args, **kwargs)
        tag_load_balancers(self)
        return out

    ClassicLoadBalancer.create_from_cloudformation_json = classmethod(create_classic)
    resource_map_cls.create = create
    resource_map_cls.update = update


def apply_patches() -> None:
    """Apply every correction; raises ``PatchError`` if moto's internals moved."""
    patch_termination_protection()
    patch_vpc_peering_cloudformation()
    patch_bucket_policy_conditions()
    patch_vpc_cidr_block_cloudformation()
    patch_network_resource_deletion()
    patch_depends_on_for_references()
    patch_serial_cloudformation()
    patch_route_and_peering_deletion()
    patch_interface_and_volume_cloudformation()
    patch_tag_lookup()
    patch_security_group_in_use()
    patch_hosted_zone_deletion()
    patch_load_balancer_cloudformation()


# --- request log ------------------------------------------------------------------------------


REQUEST_LOG_PATH = "/moto-api/request-log"
"""Where the request log is served (``GET``), as a JSON list, oldest first."""

REQUEST_LOG_LIMIT = 200_000
"""The log keeps the most recent requests only, so a long-running server stays bounded."""


class RequestLog:
    """A WSGI middleware that records every AWS request before moto handles it, so that a test
    can tell *who* called *what* and *when*: two operator replicas given distinct access key ids
    show up as distinct callers. Not a correction of moto; AWS's equivalent is CloudTrail.

    Each entry holds ``time`` (seconds since the epoch, taken on arrival, before moto's own
    locks), ``key`` (the access key id of the SigV4 ``Authorization`` header), ``principal``
    (the long-term key behind it: keys issued by ``sts:AssumeRole`` are traced back to the key
    that assumed the role), ``service`` (from the credential scope), ``action`` (the Query
    ``Action``, the JSON ``X-Amz-Target`` operation, or for REST services such as S3 the HTTP
    method) and ``method``. ``GET /moto-api/request-log`` returns the entries; the request log's
    own requests and moto's ``/moto-api/`` are not logged."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.entries: list[dict[str, Any]] = []
        self.issued_by: dict[str, str] = {}

    def principal(self, key: str) -> str:
        seen = set()
        while key in self.issued_by and key not in seen:
            seen.add(key)
            key = self.issued_by[key]
        return key

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        import io
        import re
        from urllib.parse import parse_qs

        path = environ.get("PATH_INFO", "")
        if path == REQUEST_LOG_PATH:
            with self.lock:
                body = json.dumps(self.entries).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        if path.startswith("/moto-api/"):
            return self.app(environ, start_response)

        arrived = time.time()
        auth = environ.get("HTTP_AUTHORIZATION", "")
        scope = re.search(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/", auth)
        key, service = (scope.group(1), scope.group(2)) if scope else ("", "")
        method = environ.get("REQUEST_METHOD", "")
        action = ""
        params = parse_qs(environ.get("QUERY_STRING", ""))
        if "Action" in params:
            action = params["Action"][0]
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target:
            action = target.rsplit(".", 1)[-1]
        if not action and environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
            # Query protocol (EC2, CloudFormation, Auto Scaling, STS): the action is in the body.
            # Read it and hand moto an identical stream.
            length = int(environ.get("CONTENT_LENGTH") or 0)
            raw = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(raw)
            action = parse_qs(raw.decode("utf-8", "replace")).get("Action", [""])[0]
        if not action:
            action = method
        entry = {"time": arrived, "key": key, "principal": "", "service": service, "action": action, "method": method}
        with self.lock:
            entry["principal"] = self.principal(key)
            self.entries.append(entry)
            if len(self.entries) > REQUEST_LOG_LIMIT:
                del self.entries[: len(self.entries) - REQUEST_LOG_LIMIT]
        if action != "AssumeRole":
            return self.app(environ, start_response)
        # Remember which key assumed the role, to trace the issued key back to it.
        chunks = list(self.app(environ, start_response))
        issued = re.search(rb"<AccessKeyId>([^<]+)</AccessKeyId>", b"".join(chunks))
        if issued and key:
            with self.lock:
                self.issued_by[issued.group(1).decode()] = key
        return chunks


# --- serving -----------------------------------------------------------------------------------


def _wait_accepting(host: str, port: int, timeout: float = 30.0) -> None:
    """Block until a TCP connect to the server succeeds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _write_port_file(path: str, port: int) -> None:
    """Write the port through a rename so a reader never sees a partial file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def _watch_stdin(stop: threading.Event) -> None:
    """Set ``stop`` when stdin reaches EOF: the parent closed its end of the pipe or died."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    stop.set()


def main(argv: list[str] | None = None) -> int:
    # The parent as it was at start: read before the slow start-up (imports, patches, binding),
    # so that a parent that dies meanwhile is noticed too, not taken for the parent.
    parent = os.getppid()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument("--port-file", help="file that receives the bound port once serving")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args(argv)

    if not args.verbose:
        # One line per request on a pipe nobody reads would fill it and stall the server.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)

    apply_patches()

    from werkzeug.serving import make_server

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )

    # What moto's ThreadedMotoServer does, but binding here in the main thread, so that a bind
    # failure ends the process with the error instead of leaving a server thread that never
    # signals readiness.
    app = RequestLog(DomainDispatcherApplication(create_backend_app))
    server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)
    host, port = server.server_address[:2]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _wait_accepting(str(host), port)
    if args.port_file:
        _write_port_file(args.port_file, port)
    print(f"moto listening on http://{host}:{port}", file=sys.stderr, flush=True)

    stop = threading.Event()
    # Only a pipe signals the parent's death by EOF; a terminal or /dev/null would not (or would
    # at once), so for those the parent-pid check alone applies.
    if stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode):
        threading.Thread(target=_watch_stdin, args=(stop,), daemon=True).start()
    while not stop.wait(0.5):
        if os.getppid() != parent:
            break
    # The server thread is a daemon; exiting the process ends it without a slow shutdown.
    return 0


if __name__ == "__main__":
    sys.exit(main())
