#!/usr/bin/env python3
"""moto, the AWS emulator, on loopback for the test suites, with its behaviours corrected where they differ from AWS.

Usage::

    python tools/moto/server.py --host 127.0.0.1 --port 0 --port-file PATH [--time-scale F]

Binds ``--host`` on ``--port`` (0 picks a free port), writes the bound port to ``--port-file``
(atomically, once the socket accepts connections) and serves until its parent goes away: the
process exits when its stdin reaches end-of-file (the parent holds the write end of a pipe, so
this happens however the parent dies) or when its parent process id changes (the parent died and
the process was re-parented). Tests therefore never leak servers.

moto 5.2.5 differs from AWS in ways that would make an operator test either fail for the wrong
reason or pass without exercising the real code path. Thirteen of them are corrected here, each
by a small monkeypatch that names the moto behaviour it replaces:

1. CloudFormation termination protection: ``UpdateTerminationProtection`` is implemented and
   ``DeleteStack`` refuses a protected stack with AWS's ``ValidationError``.
2. ``AWS::EC2::VPCPeeringConnection`` honours ``PeerOwnerId``/``PeerRegion``, so a stack in a
   tenant account can peer with a VPC of the management account.
3. S3 bucket policies: moto does not evaluate conditions faithfully (a ``Deny`` on
   ``aws:SecureTransport = false`` denies *every* request). The emulator evaluates the conditions
   it can answer from the request (``aws:SecureTransport``, always true here, and the
   server-side encryption headers), so a policy requiring SSE-KMS refuses an unencrypted
   ``PutObject``; statements with any other condition are not applied. Unconditional statements
   still apply.
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
11. Auto Scaling lifecycle hooks are applied: an instance launching or leaving a group with a
    launching or terminating hook waits in ``Pending:Wait`` or ``Terminating:Wait`` until
    ``CompleteLifecycleAction`` (by instance id or token) or the heartbeat timeout applies the
    hook's DefaultResult; ``RecordLifecycleActionHeartbeat`` extends the wait; hooks come from
    ``PutLifecycleHook`` and from ``LifecycleHookSpecificationList`` (API and template).
12. A stack update changes an ``AWS::AutoScaling::AutoScalingGroup`` in place: it keeps its name
    and its instances (moto deleted and re-created it), and a group whose launch template got a
    new version is updated even though its own template text did not change.
13. ``UpdatePolicy: AutoScalingRollingUpdate`` is honoured: after a launch template (or
    configuration, or subnet) change the group's instances are replaced in batches of
    ``MaxBatchSize``, keeping ``MinInstancesInService``, pausing ``PauseTime``, each old instance
    through the terminating hooks; the stack stays ``UPDATE_IN_PROGRESS`` until the roll ends
    (and refuses UpdateStack and DeleteStack meanwhile, as AWS does).
14. On request (emulation setting ``group_deletion_hooks``), a stack delete drains its Auto
    Scaling groups through their terminating hooks: ``DELETE_IN_PROGRESS`` until every instance
    has left ``Terminating:Wait``. Off by default, so that suites that do not drain keep moto's
    immediate delete.

One correction is of cost, not behaviour:

10. An EC2 resource's own tags are read from the account's tag table by its id. moto scanned
    every tag of the account, with a regular expression per tag, for each resource it described
    or filtered, so one ``DescribeInstances`` with a tag filter cost instances × tags: with a
    hundred clusters in one account, seconds per call, and a benchmark measured moto instead of
    the operator. AWS's cost does not grow with unrelated resources. The answer is unchanged.

Waits take AWS's time unless scaled: the **time scale** (a positive float, default 1.0) multiplies
heartbeat timeouts and pause times. At 0.01 a node pool's 3600 s drain hook times out after 36 s
and a PT10M pause lasts 6 s. Correction 14 is off unless asked for (**group deletion hooks**).
Both are set by the environment (``MOTO_TIME_SCALE=0.01``, ``MOTO_GROUP_DELETION_HOOKS=true``),
by flags (``--time-scale``, ``--group-deletion-hooks``, which win), or at run time through
``/moto-api/emulation`` (``GET`` reads them as JSON; ``POST`` a JSON object such as
``{"time_scale": 0.01, "group_deletion_hooks": true}`` sets them). Corrections 11, 13 and 14 act
from background threads; every request and every background step holds one lock around moto's
state (``STATE_LOCK``).

Three more behaviours, corrected for the teardown of what a cluster leaves outside its stacks:

15. ``DeleteSecurityGroup`` refuses, with ``DependencyViolation``, a group that a network
    interface, a load balancer or another group's rule still uses, as AWS does.
16. ``AWS::Route53::HostedZone`` is deleted with its stack, and refused (``HostedZoneNotEmpty``,
    failing the stack's deletion) while records other than its ``NS`` and ``SOA`` remain.
17. A stack's classic load balancer is placed in its template's subnets with its security groups
    and tags, and a stack's load balancers and target groups carry the stack's tags, as
    CloudFormation puts them on every resource that takes tags.

And one API moto lacks, for the operator's drift detection:

18. Stack drift detection (``DetectStackDrift``, ``DescribeStackDriftDetectionStatus``,
    ``DescribeStackResourceDrifts``, ``DetectStackResourceDrift``) for security groups and
    their rules, routes and Auto Scaling groups, the resources people change by hand in the
    cluster stacks: a detection runs for ten seconds of AWS time (scaled by the time scale),
    then reports each checked resource ``IN_SYNC``, ``MODIFIED`` (with property differences)
    or ``DELETED``.

One more, for stack updates approved as change sets:

19. ``ExecuteChangeSet`` of an ``UPDATE`` change set updates the stack as ``UpdateStack`` does
    (outputs recomputed, tags applied, rolling updates run) and removes the stack's change sets;
    deleting a change set that does not exist gives 404 ``ChangeSetNotFound``.

And one default of AWS that moto lacks:

20. A new S3 bucket has Object Ownership ``BucketOwnerEnforced`` (AWS's default since April
    2023): ``PutBucketAcl`` on it is refused with 400 ``AccessControlListNotSupported``, so
    access (log delivery included) must be granted by bucket policy, as on AWS.
21. A KMS key's policy governs reading the key (``DescribeKey``, ``ListResourceTags``): a
    request goes through only if a statement allows the action to the account (``*``, the
    account id or its ``root``, which lets IAM policies grant it) and no statement denies it.
    moto 5.2.5 applied only ``Deny`` statements, and to ``DescribeKey`` only, so a key whose
    policy shuts the account out answered every caller.

And one failure AWS has that moto never shows:

22. Throttling. With the emulation setting ``throttle_share`` above 0 (default 0), that share of
    AWS requests, picked at random, is refused before moto sees it, with the error each service
    answers when its request rate is exceeded (Amazon EC2 API Reference, "Request throttling";
    the other services' "Common Errors"): EC2 ``RequestLimitExceeded`` (503), S3 ``SlowDown``
    (503), KMS ``ThrottlingException`` (400, JSON), and ``Throttling`` (400) from
    CloudFormation, Auto Scaling, Elastic Load Balancing, IAM, Route53 and STS. A refused request
    changes nothing, as on AWS, and its request-log entry carries ``"throttled": true``.

And two for IAM roles for service accounts:

23. ``AssumeRoleWithWebIdentity`` checks the token as STS does (moto accepted any string): the
    issuer's IAM OIDC provider, the audience, expiry, the signature against the JWKS fetched as
    STS fetches it (from a bucket S3 serves, anonymously; from a CloudFront issuer, through the
    enabled distribution as it reads its S3 origin), and the role's trust conditions.
24. CloudFront: an origin keeps its ``OriginAccessControlId``; a created or changed distribution
    is ``InProgress`` for five seconds of AWS time (scaled) before ``Deployed``;
    ``DeleteDistribution`` refuses an enabled or undeployed distribution
    (``DistributionNotDisabled``, 409) and ``DeleteOriginAccessControl`` one that an origin uses
    (``OriginAccessControlInUse``, 409); origin access identities, which moto lacks, are served
    (create, get, list, delete; one in use is refused with ``CloudFrontOriginAccessIdentityInUse``).

And one API moto lacks, for the operator's quota preflight:

25. Account limits. CloudFormation ``DescribeAccountLimits`` (``StackLimit`` 2000,
    ``StackOutputsLimit`` 200, ``ConcurrentResourcesLimit`` 2500) and Auto Scaling
    ``DescribeAccountLimits`` (``MaxNumberOfAutoScalingGroups`` 200,
    ``MaxNumberOfLaunchConfigurations`` 200, with the account's current
    ``NumberOfAutoScalingGroups`` and ``NumberOfLaunchConfigurations`` in the region) answer
    AWS's documented defaults; moto 5.2.5 answered 500 NotImplemented. The emulation setting
    ``account_limits`` (``{"<account id>": {"StackLimit": 3, "MaxNumberOfAutoScalingGroups":
    1}}``) gives an account other limits, as a granted increase (or a lower test value) would.
    The limits are reported, not enforced: moto still creates past them.

And one for masters replaced on their etcd interface:

26. A terminated instance's other network interfaces (device index above 0, not deleted on
    termination) are detached and ``available``, as EC2 detaches them; moto 5.2.5 left them
    attached to the terminated instance, so a replacement could never attach them.

And one more for the quota preflight:

27. Network quotas. EC2 ``DescribeAccountAttributes`` answers ``vpc-max-elastic-ips`` and
    ``max-elastic-ips`` and Service Quotas ``GetServiceQuota`` answers "VPCs per Region"
    (``vpc`` ``L-F678F1CE``) and "NAT gateways per Availability Zone" (``vpc`` ``L-FE5A380F``)
    from the calling account's limits: AWS's default of 5 each unless ``account_limits`` gives
    the account (or every account, ``"*"``) others; moto 5.2.5 answered its fixed defaults
    whatever an account was granted. Reported, not enforced.

Besides the corrections, the server keeps a log of every request with the access key that sent
it (``GET /moto-api/request-log``, see ``RequestLog``), so that tests can tell callers apart.

Every patch first checks that the moto internals it replaces still exist and raises at start-up
otherwise (``PatchError``): a moto upgrade that moves them breaks the launcher loudly instead of
silently dropping a correction.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import random
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


# --- Shared by 11-13: one lock around moto's state, the emulator's clock -------------------------


STATE_LOCK = threading.RLock()
"""Held by every request moto serves (see ``patch_serial_requests``) and by the background work of
corrections 11 and 13 (lifecycle timeouts, rolling updates), so that a timeout or a batch never
acts in the middle of a request, and requests keep seeing moto's state whole."""

TIME_SCALE_ENV = "MOTO_TIME_SCALE"
"""Environment variable: the factor applied to every emulated wait (see ``Emulation``)."""

GROUP_DELETION_HOOKS_ENV = "MOTO_GROUP_DELETION_HOOKS"
"""Environment variable: ``true`` makes a stack delete drain its groups through their hooks."""

EMULATION_PATH = "/moto-api/emulation"
"""``GET`` answers the emulation settings as JSON (``{"time_scale": 1.0, "group_deletion_hooks":
false, "throttle_share": 0.0, "account_limits": {}}``); ``POST`` with a JSON object holding any of
them sets them and answers the result."""


ACCOUNT_LIMIT_DEFAULTS: dict[str, int] = {
    # CloudFormation, "CloudFormation quotas" (AWS CloudFormation User Guide).
    "StackLimit": 2000,
    "StackOutputsLimit": 200,
    "ConcurrentResourcesLimit": 2500,
    # Auto Scaling, "Quotas for Amazon EC2 Auto Scaling".
    "MaxNumberOfAutoScalingGroups": 200,
    "MaxNumberOfLaunchConfigurations": 200,
    # EC2, "Elastic IP address quota" (``DescribeAccountAttributes``; Service Quotas
    # ``ec2`` ``L-0263D0A3``).
    "vpc-max-elastic-ips": 5,
    # Amazon VPC quotas (Service Quotas ``vpc``): VPCs per Region, NAT gateways per
    # Availability Zone.
    "L-F678F1CE": 5,
    "L-FE5A380F": 5,
}
"""AWS's default account limits in a region, as ``DescribeAccountLimits``,
``DescribeAccountAttributes`` and Service Quotas answer them (corrections 25 and 27)."""

ALL_ACCOUNTS = "*"
"""The ``account_limits`` entry that applies to every account without a setting of its own."""


class Emulation:
    """Settings of the emulator that are not AWS state.

    ``time_scale`` shrinks the emulated waits of Auto Scaling and CloudFormation: lifecycle
    hooks' heartbeat (and global) timeouts and rolling updates' ``PauseTime``. 1.0 (the default)
    waits as AWS does; 0.01 makes a 3600 s heartbeat timeout last 36 s and a PT10M pause 6 s. A
    wait takes the factor in force when it starts (or, for a heartbeat, when it is recorded).

    ``group_deletion_hooks`` (default false) turns on correction 14: a stack delete drains its
    Auto Scaling groups through their terminating hooks, as CloudFormation does. Off, the groups'
    instances are terminated at once, as moto does, so that suites written before the correction
    keep their timing.

    ``throttle_share`` (default 0) turns on correction 22: that share of AWS requests (0 to 1)
    is refused with the service's throttling error.

    ``account_limits`` (default none) gives accounts other limits than AWS's defaults in the
    answers of corrections 25 and 27: ``{"<account id>": {"StackLimit": 3}}``; the entry ``"*"``
    applies to every account without a setting of its own for that limit. Setting an account
    replaces its earlier limits (``{}`` brings back the defaults); other accounts keep theirs.

    The settings are the server's, not an account's: ``/moto-api/reset`` wipes AWS state but
    keeps them."""

    KEYS = ("time_scale", "group_deletion_hooks", "throttle_share", "account_limits")

    def __init__(self) -> None:
        self.time_scale = 1.0
        self.group_deletion_hooks = False
        self.throttle_share = 0.0
        self.account_limits: dict[str, dict[str, int]] = {}

    @staticmethod
    def parse_account_limits(value: Any) -> dict[str, dict[str, int]]:
        """``{account id: {limit name: non-negative integer}}`` with names from
        ``ACCOUNT_LIMIT_DEFAULTS``, or ``ValueError`` naming the fix."""
        if not isinstance(value, dict):
            raise ValueError(f"account_limits {value!r} is not an object such as {{\"123456789012\": {{\"StackLimit\": 3}}}}")
        out: dict[str, dict[str, int]] = {}
        for account, limits in value.items():
            if not isinstance(limits, dict):
                raise ValueError(f"account_limits of {account}: {limits!r} is not an object of limit names and numbers")
            for name, number in limits.items():
                if name not in ACCOUNT_LIMIT_DEFAULTS:
                    raise ValueError(
                        f"account_limits of {account}: unknown limit {name!r}; known: {', '.join(ACCOUNT_LIMIT_DEFAULTS)}"
                    )
                if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                    raise ValueError(f"account_limits of {account}: {name} {number!r} is not a non-negative integer")
            out[str(account)] = dict(limits)
        return out

    @staticmethod
    def parse_share(value: Any) -> float:
        """A float from 0 to 1, or ``ValueError`` naming the fix."""
        try:
            share = float(value)
        except (TypeError, ValueError):
            share = float("nan")
        if not (0.0 <= share <= 1.0):
            raise ValueError(f"throttle share {value!r} is not a number from 0 to 1; set e.g. 0.2 for one call in five")
        return share

    @staticmethod
    def parse_time_scale(value: Any) -> float:
        """A positive, finite float, or ``ValueError`` naming the fix."""
        try:
            scale = float(value)
        except (TypeError, ValueError):
            scale = float("nan")
        if not (scale > 0 and scale < float("inf")):
            raise ValueError(
                f"time scale {value!r} is not a positive number; set {TIME_SCALE_ENV} (or --time-scale) "
                "to e.g. 1.0 (AWS timing) or 0.01 (a hundred times faster)"
            )
        return scale

    @staticmethod
    def parse_flag(value: Any) -> bool:
        """``true``/``false`` (any case, or a JSON boolean), or ``ValueError`` naming the fix."""
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no", ""):
            return False
        raise ValueError(f"{value!r} is not true or false (set {GROUP_DELETION_HOOKS_ENV} to true or false)")

    def update(self, settings: dict[str, Any]) -> None:
        """Applies ``settings`` (keys ``time_scale``, ``group_deletion_hooks``,
        ``throttle_share``, ``account_limits``) all or nothing."""
        unknown = set(settings) - set(self.KEYS)
        if unknown:
            raise ValueError(f"unknown emulation settings {sorted(unknown)}; known: {', '.join(self.KEYS)}")
        scale = self.parse_time_scale(settings["time_scale"]) if "time_scale" in settings else self.time_scale
        hooks = (
            self.parse_flag(settings["group_deletion_hooks"])
            if "group_deletion_hooks" in settings
            else self.group_deletion_hooks
        )
        share = self.parse_share(settings["throttle_share"]) if "throttle_share" in settings else self.throttle_share
        limits = dict(self.account_limits)
        if "account_limits" in settings:
            limits.update(self.parse_account_limits(settings["account_limits"]))
        self.time_scale, self.group_deletion_hooks, self.throttle_share = scale, hooks, share
        self.account_limits = {account: named for account, named in limits.items() if named}

    def as_dict(self) -> dict[str, Any]:
        return {
            "time_scale": self.time_scale,
            "group_deletion_hooks": self.group_deletion_hooks,
            "throttle_share": self.throttle_share,
            "account_limits": self.account_limits,
        }

    def account_limit(self, account: str, name: str) -> int:
        """The limit ``name`` of ``account``: its setting, else every account's (``"*"``), else
        AWS's default."""
        own = self.account_limits.get(account, {})
        if name in own:
            return own[name]
        return self.account_limits.get(ALL_ACCOUNTS, {}).get(name, ACCOUNT_LIMIT_DEFAULTS[name])

    def seconds(self, aws_seconds: float) -> float:
        return aws_seconds * self.time_scale


EMULATION = Emulation()


def _iso_duration(text: str) -> float:
    """Seconds of an ISO-8601 duration as CloudFormation's ``PauseTime`` takes it (``PT5M``,
    ``PT1H30M``, ``PT45S``); ``ValueError`` otherwise."""
    import re

    match = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", str(text))
    if not match or str(text) in ("P", "PT") or str(text).endswith("T"):
        raise ValueError(f"PauseTime {text!r} is not an ISO-8601 duration such as PT5M")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


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


# The request condition keys of S3 that the emulator evaluates, each from the request's header
# (Amazon S3 User Guide, "Bucket policy examples": "Require SSE-KMS for all objects written to a
# bucket"; Service Authorization Reference, "Condition keys for Amazon S3").
_S3_HEADER_KEYS = {
    "s3:x-amz-server-side-encryption": "x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-aws-kms-key-id": "x-amz-server-side-encryption-aws-kms-key-id",
}
_s3_request = threading.local()


def _s3_condition_holds(condition: dict[str, Any], headers: dict[str, str]) -> bool | None:
    """Whether ``condition`` holds for a request with ``headers`` (lower-case names); ``None``
    when it names an operator or key the emulator does not evaluate. ``aws:SecureTransport`` is
    ``true``: tests reach the emulator over plain HTTP on 127.0.0.1, standing for AWS's HTTPS."""
    for operator, pairs in condition.items():
        for key, expected in pairs.items():
            wanted = [str(v) for v in (expected if isinstance(expected, list) else [expected])]
            if key == "aws:SecureTransport":
                actual: str | None = "true"
            elif key in _S3_HEADER_KEYS:
                actual = headers.get(_S3_HEADER_KEYS[key])
            else:
                return None
            if operator == "StringEquals":
                ok = actual is not None and actual in wanted
            elif operator == "StringNotEquals":
                # IAM: a key absent from the request matches StringNotEquals.
                ok = actual is None or actual not in wanted
            elif operator == "Bool":
                ok = actual is not None and actual.lower() in [w.lower() for w in wanted]
            elif operator == "Null":
                ok = (actual is None) == (wanted[0].lower() == "true")
            else:
                return None
            if not ok:
                return False
    return True


def patch_bucket_policy_conditions() -> None:
    """moto 5.2.5 evaluates a statement's ``Condition`` against request values it never
    collects, and a failed condition check yields DENIED whatever the statement's effect. A
    TLS-only policy (Deny ``s3:*`` when ``aws:SecureTransport`` is ``false``) therefore denies
    every object request, including the HTTPS-equivalent ones a test makes, and every upload after
    such a policy fails with 403. The emulator now evaluates the conditions it can answer from the
    request: ``aws:SecureTransport`` (always ``true``) and the server-side encryption headers
    (``s3:x-amz-server-side-encryption``, ``…-aws-kms-key-id``) with ``StringEquals``,
    ``StringNotEquals``, ``Bool`` and ``Null``, so a policy that denies uploads without SSE-KMS
    refuses them as AWS does. A statement with any other condition is ignored; unconditional
    Allow/Deny statements still apply."""
    from moto.iam.access_control import IAMPolicy, PermissionResult
    from moto.s3 import models as s3_models
    from moto.s3 import responses as s3_responses

    bucket_cls = _require(s3_models, "FakeBucket")
    _require(bucket_cls, "get_permission")
    _require(IAMPolicy, "is_action_permitted")
    response_cls = _require(s3_responses, "S3Response")
    original_key_response = _require(response_cls, "_key_response")

    def key_response(self: Any, request: Any, full_url: str) -> Any:
        _s3_request.headers = {k.lower(): v for k, v in dict(request.headers).items()}
        try:
            return original_key_response(self, request, full_url)
        finally:
            _s3_request.headers = None

    def get_permission(self: Any, action: str, resource: str) -> Any:
        if self.policy is None:
            return PermissionResult.NEUTRAL
        document = json.loads(self.policy)
        statements = document.get("Statement", [])
        if isinstance(statements, dict):
            statements = [statements]
        headers = getattr(_s3_request, "headers", None) or {}
        applicable = []
        for statement in statements:
            condition = statement.get("Condition")
            if condition is None:
                applicable.append(statement)
                continue
            if _s3_condition_holds(condition, headers):
                applicable.append({k: v for k, v in statement.items() if k != "Condition"})
        if not applicable:
            return PermissionResult.NEUTRAL
        document["Statement"] = applicable
        return IAMPolicy(json.dumps(document)).is_action_permitted(action, resource)

    bucket_cls.get_permission = get_permission
    response_cls._key_response = key_response


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
    server, ``STATE_LOCK``; moto holds the interpreter lock for its work anyway), so a
    DescribeStacks waits for the creation it would have raced."""
    from moto.cloudformation import responses as cfn_responses

    response_cls = _require(cfn_responses, "CloudFormationResponse")
    original = _require(response_cls, "call_action")
    def call_action(self: Any) -> Any:
        with STATE_LOCK:
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


def patch_serial_requests() -> None:
    """Not a correction of AWS behaviour but a precondition of 11 and 13, which change moto's state
    from background threads (a heartbeat timing out, a rolling update's next batch). moto's models
    are not thread-safe: a DescribeInstances iterating the reservations while a batch launches
    instances could fail with "dictionary changed size during iteration". Every request moto
    dispatches (``BaseResponse.call_action``) holds ``STATE_LOCK``, as the background work does.
    moto's work holds the interpreter lock anyway, so requests lose no real concurrency."""
    from moto.core import responses as core_responses

    base_cls = _require(core_responses, "BaseResponse")
    original = _require(base_cls, "call_action")

    def call_action(self: Any) -> Any:
        with STATE_LOCK:
            return original(self)

    base_cls.call_action = call_action


# --- 11. Auto Scaling lifecycle hooks -----------------------------------------------------------


LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
COUNTED_STATES = ("Pending", "Pending:Wait", "Pending:Proceed", "InService")
"""Lifecycle states that count toward a group's desired capacity (Standby and terminating
instances do not: AWS launches a replacement for an instance that starts terminating unless the
desired capacity was decremented)."""


class LifecycleAction:
    """One hook's wait on one instance: ``Pending:Wait`` or ``Terminating:Wait`` until completed,
    abandoned or timed out."""

    def __init__(self, hook: Any, group: Any, state: Any) -> None:
        import uuid

        self.hook = hook
        self.group = group
        self.state = state
        self.token = str(uuid.uuid4())
        heartbeat = float(hook.heartbeat_timeout)
        now = time.monotonic()
        self.heartbeat = heartbeat
        self.deadline = now + EMULATION.seconds(heartbeat)
        self.global_deadline = now + EMULATION.seconds(float(getattr(hook, "global_timeout", 172800)))

    @property
    def transition(self) -> str:
        return str(self.hook.lifecycle_transition)


class LifecycleClock:
    """Applies a hook's ``DefaultResult`` to the actions whose heartbeat timeout has passed. One
    daemon thread, started with the first action, ticks every 0.2 s under ``STATE_LOCK``."""

    TICK = 0.2

    def __init__(self) -> None:
        self.actions: dict[str, LifecycleAction] = {}
        self.thread: threading.Thread | None = None

    def add(self, action: LifecycleAction) -> None:
        self.actions[action.token] = action
        if self.thread is None:
            self.thread = threading.Thread(target=self.run, name="lifecycle-clock", daemon=True)
            self.thread.start()

    def remove(self, action: LifecycleAction) -> None:
        self.actions.pop(action.token, None)

    def run(self) -> None:
        while True:
            time.sleep(self.TICK)
            with STATE_LOCK:
                now = time.monotonic()
                for action in list(self.actions.values()):
                    if action.token not in self.actions:
                        continue  # ended by an earlier action of this tick
                    if not _group_live(action.group):
                        self.remove(action)  # group deleted, or the server reset
                    elif now >= min(action.deadline, action.global_deadline):
                        try:
                            _complete_action(action, str(action.hook.default_result or "ABANDON"))
                        except Exception as err:  # noqa: BLE001 - one bad action must not stop the clock
                            self.remove(action)
                            print(f"lifecycle clock: {type(err).__name__}: {err}", file=sys.stderr)


CLOCK = LifecycleClock()


def _group_live(group: Any) -> bool:
    """Whether ``group`` is still the group of its name in its account and region (not deleted,
    not wiped by ``/moto-api/reset``)."""
    from moto.autoscaling.models import autoscaling_backends

    try:
        backend = autoscaling_backends[group.account_id][group.region]
    except KeyError:
        return False
    return backend is group.autoscaling_backend and backend.autoscaling_groups.get(group.name) is group


def _hooks_of(group: Any, transition: str) -> list[Any]:
    return [
        hook
        for hook in group.autoscaling_backend.lifecycle_hooks.values()
        if hook.auto_scaling_group_name == group.name and hook.lifecycle_transition == transition
    ]


def _put_hook(backend: Any, group_name: str, spec: dict[str, Any], merge: bool = True) -> Any:
    """Creates or updates a hook from ``spec`` (PutLifecycleHook's parameters, or an entry of a
    ``LifecycleHookSpecificationList``). Like PutLifecycleHook, an update keeps what ``spec``
    leaves out (unless ``merge`` is false: CloudFormation sets a listed hook whole); a new hook
    gets AWS's defaults (3600 s, ABANDON). moto filled in a placeholder role and SQS queue; a hook
    now has the ones it was given, or none. Waiting actions keep their deadline and take the
    updated DefaultResult."""
    key = f"{group_name}_{spec['LifecycleHookName']}"
    existing = backend.lifecycle_hooks.get(key) if merge else None
    previous = backend.lifecycle_hooks.get(key)

    def given(key: str, attribute: str) -> Any:
        value = spec.get(key)
        if value in (None, "") and existing is not None:
            return getattr(existing, attribute, None)
        return value

    timeout = given("HeartbeatTimeout", "heartbeat_timeout")
    hook = backend.create_lifecycle_hook(
        name=spec["LifecycleHookName"],
        as_name=group_name,
        transition=given("LifecycleTransition", "lifecycle_transition"),
        timeout=int(timeout) if timeout not in (None, "") else None,
        result=given("DefaultResult", "default_result"),
    )
    hook.role_arn = given("RoleARN", "role_arn")
    hook.notification_target_arn = given("NotificationTargetARN", "notification_target_arn")
    hook.notification_metadata = given("NotificationMetadata", "notification_metadata")
    # AWS ends a wait at 100 heartbeat timeouts or 48 hours, whichever is shorter.
    hook.global_timeout = min(100 * int(hook.heartbeat_timeout), 172800)
    if previous is not None:
        for action in CLOCK.actions.values():
            if action.hook is previous:
                action.hook = hook
    return hook


def _launch_spec(group: Any) -> tuple[Any, ...]:
    """What an instance launched now is launched from: the launch template and its resolved
    version, or the launch configuration."""
    template = group.ec2_launch_template
    if template is not None:
        version = template.get_version(group.launch_template_version).number
        return ("template", template.id, template.name, int(version))
    return ("configuration", getattr(group, "launch_configuration_name", None))


def _cancel_actions(state: Any) -> None:
    for action in list(getattr(state, "lifecycle_actions", {}).values()):
        CLOCK.remove(action)
    state.lifecycle_actions = {}


def _start_wait(group: Any, state: Any, transition: str, wait_state: str) -> bool:
    hooks = _hooks_of(group, transition)
    if not hooks:
        return False
    state.lifecycle_state = wait_state
    state.lifecycle_actions = {}
    for hook in hooks:
        action = LifecycleAction(hook, group, state)
        state.lifecycle_actions[hook.name] = action
        CLOCK.add(action)
    return True


def _refresh_load_balancers(group: Any) -> None:
    backend = group.autoscaling_backend
    if backend.autoscaling_groups.get(group.name) is group:
        backend.update_attached_elbs(group.name)
        backend.update_attached_target_groups(group.name)


def _launched(group: Any, state: Any) -> None:
    """A new instance: ``Pending:Wait`` while launching hooks exist, else ``InService``."""
    state.launch_spec = _launch_spec(group)
    state.lifecycle_actions = {}
    if not _start_wait(group, state, LAUNCHING, "Pending:Wait"):
        state.lifecycle_state = "InService"


def _begin_termination(group: Any, state: Any) -> None:
    """``Terminating:Wait`` while terminating hooks exist, else terminated at once."""
    if str(state.lifecycle_state).startswith("Terminating"):
        return
    _cancel_actions(state)
    state.lifecycle_state = "Terminating"
    if not _start_wait(group, state, TERMINATING, "Terminating:Wait"):
        _finish_termination(group, state)


def _finish_termination(group: Any, state: Any) -> None:
    """``Terminating:Proceed``: the EC2 instance is terminated and leaves the group."""
    state.lifecycle_state = "Terminating:Proceed"
    _cancel_actions(state)
    group.instance_states = [s for s in group.instance_states if s is not state]
    backend = group.autoscaling_backend
    try:
        backend.ec2_backend.terminate_instances([state.instance.id])
    except Exception:  # noqa: BLE001 - already gone through EC2
        pass
    try:
        backend.elbv2_backend.notify_terminate_instances([state.instance.id])
    except Exception:  # noqa: BLE001 - no target group knows it
        pass
    state.lifecycle_state = "Terminated"
    _refresh_load_balancers(group)


def _complete_action(action: LifecycleAction, result: str) -> None:
    """A hook's action ends with ``result``; the instance proceeds once no action is left.
    ABANDON ends the instance's other actions too (AWS: "stops any remaining actions, such as
    other lifecycle hooks"); a launch that is abandoned terminates the instance, and the group
    launches a replacement."""
    state, group = action.state, action.group
    CLOCK.remove(action)
    state.lifecycle_actions.pop(action.hook.name, None)
    if result == "ABANDON":
        state.abandoned = True
        _cancel_actions(state)
    if state.lifecycle_actions:
        return
    if action.transition == TERMINATING:
        _finish_termination(group, state)
    elif getattr(state, "abandoned", False):
        state.lifecycle_state = "Terminating"
        _finish_termination(group, state)
        if _group_live(group):
            group.set_desired_capacity(group.desired_capacity)
    else:
        state.lifecycle_state = "InService"
        _refresh_load_balancers(group)


def _find_action(backend: Any, group_name: str, hook_name: str, token: str | None, instance_id: str | None) -> Any:
    from moto.autoscaling.exceptions import ValidationError

    if not token and not instance_id:
        raise ValidationError("Either LifecycleActionToken or InstanceId must be specified")
    group = backend.autoscaling_groups.get(group_name)
    for action in list(CLOCK.actions.values()):
        if action.group is not group or action.hook.name != hook_name:
            continue
        if (token and action.token == token) or (not token and action.state.instance.id == instance_id):
            return action
    if token:
        raise ValidationError(f"No active Lifecycle Action found with token {token}")
    raise ValidationError(f"No active Lifecycle Action found with instance ID {instance_id}")


def patch_lifecycle_hooks() -> None:
    """moto 5.2.5 stores lifecycle hooks (``PutLifecycleHook``) but never applies them: instances
    go straight to ``InService`` and straight to terminated, ``LifecycleHookSpecificationList`` is
    ignored (API and CloudFormation), and ``CompleteLifecycleAction`` and
    ``RecordLifecycleActionHeartbeat`` answer 500 NotImplementedError. The EC2 Auto Scaling User
    Guide ("Amazon EC2 Auto Scaling lifecycle hooks", "Complete a lifecycle action") describes
    what AWS does, and the emulator now does it:

    * hooks from ``LifecycleHookSpecificationList`` exist before the group launches its first
      instances (``CreateAutoScalingGroup`` and ``AWS::AutoScaling::AutoScalingGroup``), and go
      with the group when it is deleted;
    * an instance launched while an ``autoscaling:EC2_INSTANCE_LAUNCHING`` hook exists waits in
      ``Pending:Wait``; CONTINUE makes it ``InService`` (and registers it with the group's load
      balancers), ABANDON terminates it and the group launches a replacement;
    * an instance leaving the group (scale-in through SetDesiredCapacity, UpdateAutoScalingGroup
      or a stack update, ``TerminateInstanceInAutoScalingGroup``, a rolling update's batch) while
      an ``autoscaling:EC2_INSTANCE_TERMINATING`` hook exists waits in ``Terminating:Wait``;
      CONTINUE or ABANDON (or its heartbeat timeout) moves it through ``Terminating:Proceed``: the
      EC2 instance is terminated and leaves the group. Scale-in picks instances launched from an
      older launch template version or configuration first (the default termination policy);
    * ``CompleteLifecycleAction`` takes the instance id or the action's token; an instance with
      no action of that hook fails with 400 ``ValidationError: No active Lifecycle Action found
      with instance ID <id>`` (or ``with token <token>``);
    * ``RecordLifecycleActionHeartbeat`` restarts the heartbeat timeout; the wait ends in any case
      after 100 heartbeat timeouts or 48 hours, whichever is shorter;
    * after ``HeartbeatTimeout`` seconds (times the time scale) the hook's ``DefaultResult``
      applies (ABANDON when the hook has none);
    * desired capacity counts ``Pending*`` and ``InService`` instances (moto counted ``InService``
      only, so an instance in ``Pending:Wait`` would have been launched twice);
    * ``DescribeLifecycleHooks`` shows the role, notification target and metadata a hook was
      given (moto showed a placeholder role and SQS queue for every hook) and its GlobalTimeout;
      ``PutLifecycleHook`` on an existing hook keeps the settings it leaves out;
      ``DeleteLifecycleHook`` first completes the hook's outstanding actions (ABANDON for
      launching instances, CONTINUE for terminating ones);
    * ``TerminateInstanceInAutoScalingGroup`` of an unknown instance fails with 400
      ``ValidationError`` instead of 500, and with ShouldDecrementDesiredCapacity refuses to go
      below the group's minimum size, as AWS does.

    Not emulated: notifications (SNS, SQS, EventBridge; ``NotificationMetadata`` is stored and
    described only); the hooks of a group deleted through ``DeleteAutoScalingGroup`` (its
    instances are terminated at once, as moto did; for a stack delete see correction 14); warm
    pools; instance refreshes."""
    from moto.autoscaling import models as asg_models
    from moto.autoscaling import responses as asg_responses
    from moto.autoscaling.exceptions import ValidationError
    from moto.core.responses import EmptyResult

    group_cls = _require(asg_models, "FakeAutoScalingGroup")
    backend_cls = _require(asg_models, "AutoScalingBackend")
    state_cls = _require(asg_models, "InstanceState")
    response_cls = _require(asg_responses, "AutoScalingResponse")
    terminate_activity = _require(asg_models, "TerminateInstanceActivity")
    original_replace = _require(group_cls, "replace_autoscaling_group_instances")
    original_create_cfn = _require(group_cls, "create_from_cloudformation_json")
    original_create = _require(response_cls, "create_auto_scaling_group")
    _require(response_cls, "put_lifecycle_hook")
    original_delete = _require(backend_cls, "delete_auto_scaling_group")
    original_delete_hook = _require(backend_cls, "delete_lifecycle_hook")
    original_lt_property = _require(state_cls, "launch_template")
    for name in ("set_desired_capacity", "get_propagated_tags", "update"):
        _require(group_cls, name)
    for name in ("terminate_instance", "notify_terminate_instances", "create_lifecycle_hook", "delete_lifecycle_hook",
                 "update_attached_elbs", "update_attached_target_groups"):
        _require(backend_cls, name)
    for name in ("complete_lifecycle_action", "record_lifecycle_action_heartbeat"):
        if name in vars(response_cls):
            raise PatchError(f"moto now implements {name}; review tools/moto/server.py")

    def target_instances(group: Any) -> int:
        """Instances needed for the desired capacity, as moto computes it (a mixed-instances
        policy with overrides counts the first override's weight)."""
        import math

        target = group.desired_capacity or 0
        policy = group.mixed_instances_policy or {}
        overrides = policy.get("LaunchTemplate", {}).get("Overrides", []) if policy else []
        if not overrides:
            return int(target)
        weight_text = str(overrides[0].get("WeightedCapacity", "1"))
        weight = int(weight_text) if weight_text.isdigit() and int(weight_text) > 0 else 1
        distribution = policy.get("InstancesDistribution", {})
        base = int(distribution.get("OnDemandBaseCapacity", 0))
        percent = int(distribution.get("OnDemandPercentageAboveBaseCapacity", 100))
        if base >= target:
            on_demand, spot = target, 0
        else:
            above = target - base
            on_demand_above = int(above * percent) / 100.0
            on_demand, spot = int(base + on_demand_above), int(above - on_demand_above)
        return math.ceil(on_demand / weight) + math.ceil(spot / weight)

    def set_desired_capacity(self: Any, new_capacity: int | None) -> None:
        self.desired_capacity = self.min_size if new_capacity is None else new_capacity
        counted = [s for s in self.instance_states if s.lifecycle_state in COUNTED_STATES]
        delta = target_instances(self) - len(counted)
        if delta > 0:
            self.replace_autoscaling_group_instances(delta, self.get_propagated_tags())
        elif delta < 0:
            current = _launch_spec(self)
            candidates = [s for s in counted if not s.protected_from_scale_in]
            # Default termination policy: instances from an older launch template version or
            # configuration first, then the oldest.
            candidates.sort(key=lambda s: getattr(s, "launch_spec", None) == current)
            for state in candidates[: -delta]:
                _begin_termination(self, state)
        _refresh_load_balancers(self)

    def replace_autoscaling_group_instances(self: Any, count_needed: int, propagated_tags: dict[str, str]) -> None:
        before = list(self.instance_states)
        original_replace(self, count_needed, propagated_tags)
        for state in self.instance_states:
            if not any(state is b for b in before):
                _launched(self, state)

    def launch_template(self: Any) -> Any:
        spec = getattr(self, "launch_spec", None)
        if spec and spec[0] == "template":
            return {"LaunchTemplateId": spec[1], "LaunchTemplateName": spec[2], "Version": str(spec[3])}
        return original_lt_property.fget(self)

    def put_hooks(backend: Any, group_name: str, specs: list[dict[str, Any]]) -> list[str]:
        return [_put_hook(backend, group_name, spec).name for spec in specs or []]

    def put_lifecycle_hook(self: Any) -> Any:
        _put_hook(
            self.autoscaling_backend,
            self._get_param("AutoScalingGroupName"),
            {
                key: self._get_param(key)
                for key in ("LifecycleHookName", "LifecycleTransition", "HeartbeatTimeout", "DefaultResult",
                            "RoleARN", "NotificationTargetARN", "NotificationMetadata")
            },
        )
        return EmptyResult()

    def create_with_hooks(backend: Any, group_name: str, specs: list[dict[str, Any]], create: Any) -> Any:
        if group_name in backend.autoscaling_groups or not specs:
            return create()
        names = put_hooks(backend, group_name, specs)
        try:
            return create()
        except Exception:
            for name in names:
                backend.delete_lifecycle_hook(group_name, name)
            raise

    def create_auto_scaling_group(self: Any) -> Any:
        specs = self._get_param("LifecycleHookSpecificationList", []) or []
        return create_with_hooks(
            self.autoscaling_backend, self._get_param("AutoScalingGroupName"), specs, lambda: original_create(self)
        )

    def create_from_cloudformation_json(
        cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        specs = cloudformation_json.get("Properties", {}).get("LifecycleHookSpecificationList", []) or []
        backend = asg_models.autoscaling_backends[account_id][region_name]
        group = create_with_hooks(
            backend,
            resource_name,
            specs,
            lambda: original_create_cfn(resource_name, cloudformation_json, account_id, region_name, **kwargs),
        )
        # The hooks the template manages: a later update removes those it no longer lists.
        group.cfn_hook_names = {spec["LifecycleHookName"] for spec in specs}
        return group

    def delete_auto_scaling_group(self: Any, group_name: str) -> None:
        group = self.autoscaling_groups.get(group_name)
        if group is not None:
            for state in group.instance_states:
                _cancel_actions(state)
            # Terminated at once, as moto did (the hooks of a deleted group are not emulated).
            ids = [s.instance.id for s in group.instance_states]
            group.instance_states = []
            if ids:
                self.ec2_backend.terminate_instances(ids)
        original_delete(self, group_name)
        for key, hook in list(self.lifecycle_hooks.items()):
            if hook.auto_scaling_group_name == group_name:
                del self.lifecycle_hooks[key]

    def delete_lifecycle_hook(self: Any, as_name: str, name: str) -> None:
        # AWS: "If there are any outstanding lifecycle actions, they are completed first
        # (ABANDON for launching instances, CONTINUE for terminating instances)."
        for action in list(CLOCK.actions.values()):
            if action.token not in CLOCK.actions:
                continue
            if action.group.autoscaling_backend is self and action.group.name == as_name and action.hook.name == name:
                _complete_action(action, "ABANDON" if action.transition == LAUNCHING else "CONTINUE")
        original_delete_hook(self, as_name, name)

    def terminate_instance(self: Any, instance_id: str, should_decrement: bool) -> Any:
        state = next(
            (s for g in self.autoscaling_groups.values() for s in g.instance_states if s.instance.id == instance_id),
            None,
        )
        if state is None:
            raise ValidationError(f"Instance Id not found - No managed instance found for instance ID: {instance_id}")
        group = state.auto_scaling_group
        original_size = group.desired_capacity
        if should_decrement and not str(state.lifecycle_state).startswith("Terminating"):
            if group.desired_capacity - 1 < (group.min_size or 0):
                raise ValidationError(
                    f"Currently, desiredSize equals minSize ({group.min_size}). Terminating instance without "
                    "replacement will violate group's min size constraint. Either set "
                    "shouldDecrementDesiredCapacity flag to false or lower group's min size."
                )
            group.desired_capacity -= 1
        _begin_termination(group, state)
        # Without the decrement the group launches a replacement now.
        group.set_desired_capacity(group.desired_capacity)
        return terminate_activity(state.instance, original_size)

    def notify_terminate_instances(self: Any, instance_ids: list[str]) -> None:
        # An instance terminated through EC2 leaves its group at once, hooks or not; the group
        # replaces it if it counted toward the desired capacity.
        for group in list(self.autoscaling_groups.values()):
            gone = [s for s in group.instance_states if s.instance.id in instance_ids]
            if not gone:
                continue
            for state in gone:
                _cancel_actions(state)
            group.instance_states = [s for s in group.instance_states if s.instance.id not in instance_ids]
            group.set_desired_capacity(group.desired_capacity)

    def lifecycle_request(self: Any) -> Any:
        return _find_action(
            self.autoscaling_backend,
            self._get_param("AutoScalingGroupName"),
            self._get_param("LifecycleHookName"),
            self._get_param("LifecycleActionToken"),
            self._get_param("InstanceId"),
        )

    def complete_lifecycle_action(self: Any) -> Any:
        result = self._get_param("LifecycleActionResult")
        if result not in ("CONTINUE", "ABANDON"):
            raise ValidationError(f"Value '{result}' at 'lifecycleActionResult' failed to satisfy constraint: "
                                  "Member must be CONTINUE or ABANDON")
        _complete_action(lifecycle_request(self), result)
        return EmptyResult()

    def record_lifecycle_action_heartbeat(self: Any) -> Any:
        action = lifecycle_request(self)
        action.deadline = min(time.monotonic() + EMULATION.seconds(action.heartbeat), action.global_deadline)
        return EmptyResult()

    group_cls.set_desired_capacity = set_desired_capacity
    group_cls.replace_autoscaling_group_instances = replace_autoscaling_group_instances
    group_cls.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)
    state_cls.launch_template = property(launch_template)
    backend_cls.delete_auto_scaling_group = delete_auto_scaling_group
    backend_cls.delete_lifecycle_hook = delete_lifecycle_hook
    backend_cls.terminate_instance = terminate_instance
    backend_cls.notify_terminate_instances = notify_terminate_instances
    response_cls.create_auto_scaling_group = create_auto_scaling_group
    response_cls.put_lifecycle_hook = put_lifecycle_hook
    response_cls.complete_lifecycle_action = complete_lifecycle_action
    response_cls.record_lifecycle_action_heartbeat = record_lifecycle_action_heartbeat


# --- 12. An Auto Scaling group updated in place by its stack -----------------------------------


ROLLS = threading.local()
"""The rolling updates a stack update started (``ROLLS.pending``, a list, while one runs)."""


def _references(value: Any, names: set[str]) -> bool:
    """Whether a template fragment refers (``Ref``, ``Fn::GetAtt``) to one of ``names``."""
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str) and value["Ref"] in names:
            return True
        att = value.get("Fn::GetAtt")
        if isinstance(att, list) and att and att[0] in names:
            return True
        if isinstance(att, str) and att.split(".", 1)[0] in names:
            return True
        return any(_references(v, names) for v in value.values())
    if isinstance(value, list):
        return any(_references(v, names) for v in value)
    return False


def patch_group_update_in_place() -> None:
    """moto 5.2.5 updates an ``AWS::AutoScaling::AutoScalingGroup`` by deleting the group and
    creating another: a stack update that only changes MaxSize or a tag gives the group a new
    name and terminates every instance. CloudFormation ("AWS::AutoScaling::AutoScalingGroup",
    update requires: No interruption, except ``AutoScalingGroupName``) updates the group in place,
    as ``UpdateAutoScalingGroup`` does: the group keeps its name and its instances; a smaller
    desired capacity scales in (through the terminating hooks), a larger one scales out; tags,
    load balancers, health check settings and the ``LifecycleHookSpecificationList`` (hooks added,
    changed, removed) follow the template. Only what changed between the old and the new
    template is applied, as CloudFormation does: a desired capacity an autoscaler set, or a tag
    added through the API, stays while the template's value for it does not change. A changed
    ``AutoScalingGroupName`` still replaces the group.

    moto also compares a resource's template text to decide whether to update it, so a group whose
    ``LaunchTemplate.Version`` is ``!GetAtt LaunchTemplate.LatestVersionNumber`` was left on the
    old version when only the launch template changed. CloudFormation compares resolved values:
    a group that refers to a changed or added resource is now updated too, after the resources it
    refers to."""
    from moto.autoscaling import models as asg_models
    from moto.cloudformation import parsing

    group_cls = _require(asg_models, "FakeAutoScalingGroup")
    original_update = _require(group_cls, "update_from_cloudformation_json")
    original_create = _require(group_cls, "create_from_cloudformation_json")
    _require(group_cls, "update")
    resource_map = _require(parsing, "ResourceMap")
    original_diff = _require(resource_map, "build_resource_diff")
    asg_type = "AWS::AutoScaling::AutoScalingGroup"

    def build_resource_diff(self: Any, other_template: dict[str, Any], parameters: Any = None) -> dict[str, Any]:
        diff = original_diff(self, other_template, parameters)
        new = other_template.get("Resources", {})
        changed = set(diff["Modify"]) | set(diff["Add"])
        for name, resource in new.items():
            if (
                resource.get("Type") == asg_type
                and name in self._resource_json_map
                and name not in diff["Modify"]
                and _references(resource, changed)
            ):
                diff["Modify"].append(name)
        # Groups last, after the resources they refer to, and in DependsOn order among
        # themselves (the control plane chains its masters' groups so that they roll in turn).
        order = list(new)
        groups = [n for n in diff["Modify"] if new.get(n, {}).get("Type") == asg_type]
        ordered: list[str] = []

        def visit(name: str, seen: set[str]) -> None:
            if name in ordered or name in seen:
                return
            seen.add(name)
            deps = new[name].get("DependsOn", [])
            for dep in [deps] if isinstance(deps, str) else deps:
                if dep in groups:
                    visit(dep, seen)
            ordered.append(name)

        for name in sorted(groups, key=order.index):
            visit(name, set())
        diff["Modify"] = [n for n in diff["Modify"] if n not in groups] + ordered
        return diff

    def as_bool(value: Any) -> bool:
        return str(value).lower() == "true"

    def update_from_cloudformation_json(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        from moto.autoscaling.models import make_int

        props = cloudformation_json.get("Properties", {})
        group = original_resource
        named = props.get("AutoScalingGroupName")
        if not _group_live(group) or (named and named != group.name):
            return original_update(original_resource, new_resource_name, cloudformation_json, account_id, region_name)
        backend = group.autoscaling_backend
        policy = (cloudformation_json.get("UpdatePolicy") or {}).get("AutoScalingRollingUpdate")
        if policy is not None:
            RollingUpdate.validate(policy)
        old_spec = _launch_spec(group)
        old_subnets = group.vpc_zone_identifier

        specs = props.get("LifecycleHookSpecificationList", []) or []
        wanted = {spec["LifecycleHookName"] for spec in specs}
        for name in getattr(group, "cfn_hook_names", set()) - wanted:
            backend.delete_lifecycle_hook(group.name, name)
        for spec in specs:
            _put_hook(backend, group.name, spec, merge=False)
        group.cfn_hook_names = wanted

        # CloudFormation applies what changed between the two templates: a size, tag or setting
        # the template did not change keeps its live value (a capacity set by an autoscaler, a
        # tag added through the API).
        before = getattr(group, "cfn_properties", None)
        recorded = copy.deepcopy(props)

        def changed(key: str) -> bool:
            return before is None or before.get(key) != props.get(key)

        def changed_int(key: str) -> int | None:
            return make_int(props[key]) if changed(key) and props.get(key) not in (None, "") else None

        if changed("Tags"):
            def keyed(tags: Any) -> dict[str, tuple[str, bool]]:
                return {
                    t["Key"]: (str(t.get("Value", "")), as_bool(t.get("PropagateAtLaunch", False)))
                    for t in tags or []
                }

            old_tags, new_tags = keyed((before or {}).get("Tags")), keyed(props.get("Tags"))
            live = {t["Key"]: t for t in group.tags}
            for key in old_tags.keys() - new_tags.keys():
                live.pop(key, None)
            for key, (value, propagate) in new_tags.items():
                if old_tags.get(key) != (value, propagate):
                    live[key] = {"Key": key, "Value": value, "PropagateAtLaunch": propagate}
            group.tags = list(live.values())
        if changed("LoadBalancerNames"):
            group.load_balancer_names = list(props.get("LoadBalancerNames", []) or [])
        if changed("TargetGroupARNs"):
            group.target_group_arns = list(props.get("TargetGroupARNs", []) or [])
        if changed("TerminationPolicies"):
            group.termination_policies = list(props.get("TerminationPolicies") or ["Default"])
        if changed("Cooldown") and props.get("Cooldown") is not None:
            group.default_cooldown = make_int(props["Cooldown"])
        group.update(
            availability_zones=list(props.get("AvailabilityZones", []) or []),
            desired_capacity=changed_int("DesiredCapacity"),
            max_size=changed_int("MaxSize"),
            min_size=changed_int("MinSize"),
            launch_config_name=props.get("LaunchConfigurationName"),
            launch_template=props.get("LaunchTemplate", {}) or {},
            vpc_zone_identifier=",".join(props.get("VPCZoneIdentifier", []) or []) or None,
            health_check_period=changed_int("HealthCheckGracePeriod"),
            health_check_type=props.get("HealthCheckType") if changed("HealthCheckType") else None,
            new_instances_protected_from_scale_in=(
                as_bool(props["NewInstancesProtectedFromScaleIn"])
                if "NewInstancesProtectedFromScaleIn" in props and changed("NewInstancesProtectedFromScaleIn")
                else None
            ),
            mixed_instances_policy=props.get("MixedInstancesPolicy") or None,
        )
        group.cfn_properties = recorded
        _refresh_load_balancers(group)
        if policy is not None and (_launch_spec(group) != old_spec or group.vpc_zone_identifier != old_subnets):
            pending = getattr(ROLLS, "pending", None)
            roll = RollingUpdate(group, policy, getattr(original_resource, "logical_resource_id", group.name))
            if pending is not None:
                pending.append(roll)
            else:
                threading.Thread(target=roll.run, name=f"roll-{group.name}", daemon=True).start()
        return group

    def create_from_cloudformation_json(
        cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        # The template's properties as created, for the next update to compare with (moto
        # changes the tag entries it is given, so they are copied first).
        recorded = copy.deepcopy(cloudformation_json.get("Properties", {}))
        group = original_create(resource_name, cloudformation_json, account_id, region_name, **kwargs)
        group.cfn_properties = recorded
        return group

    resource_map.build_resource_diff = build_resource_diff
    group_cls.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)
    group_cls.update_from_cloudformation_json = classmethod(update_from_cloudformation_json)


# --- 13. AutoScalingRollingUpdate ----------------------------------------------------------------


class RollingUpdate:
    """CloudFormation's rolling replacement of one group's instances after its launch template
    version, launch configuration or subnets changed (see ``patch_rolling_updates``)."""

    POLL = 0.1

    def __init__(self, group: Any, policy: dict[str, Any], logical_id: str) -> None:
        self.group = group
        self.logical_id = logical_id
        self.batch = max(1, int(policy.get("MaxBatchSize", 1)))
        self.min_in_service = max(0, int(policy.get("MinInstancesInService", 0)))
        self.pause = _iso_duration(policy.get("PauseTime", "PT0S"))

    @staticmethod
    def validate(policy: dict[str, Any]) -> None:
        from moto.autoscaling.exceptions import ValidationError

        try:
            if int(policy.get("MaxBatchSize", 1)) < 1 or int(policy.get("MinInstancesInService", 0)) < 0:
                raise ValueError("MaxBatchSize must be at least 1 and MinInstancesInService at least 0")
            if _iso_duration(policy.get("PauseTime", "PT0S")) > 3600:
                raise ValueError("PauseTime must be at most PT1H")
        except ValueError as err:
            raise ValidationError(f"Invalid AutoScalingRollingUpdate UpdatePolicy: {err}")

    def stale(self) -> list[Any]:
        """Instances not yet launched from the group's current launch specification and subnets,
        not already terminating."""
        group = self.group
        current = _launch_spec(group)
        subnets = set((group.vpc_zone_identifier or "").split(",")) - {""}
        return [
            s
            for s in group.instance_states
            if s.lifecycle_state in COUNTED_STATES
            and (
                getattr(s, "launch_spec", None) != current
                or (subnets and getattr(s.instance, "subnet_id", None) not in subnets)
            )
        ]

    def wait_until(self, done: Any) -> bool:
        """Polls ``done()`` under the state lock; False when the group went away meanwhile."""
        while True:
            with STATE_LOCK:
                if not _group_live(self.group):
                    return False
                if done():
                    return True
            time.sleep(self.POLL)

    def in_service(self) -> int:
        return sum(1 for s in self.group.instance_states if s.lifecycle_state == "InService")

    def run(self) -> None:
        group = self.group
        while True:
            with STATE_LOCK:
                if not _group_live(group):
                    return
                old = self.stale()
                if not old:
                    return
                # InService instances first: they are the ones a batch takes out of service.
                old.sort(key=lambda s: s.lifecycle_state != "InService")
                batch = old[: self.batch]
                leaving = sum(1 for s in batch if s.lifecycle_state == "InService")
                in_service = self.in_service()
                # Keep MinInstancesInService: launch the shortfall first, up to MaxSize...
                desired = group.desired_capacity or 0
                headroom = max(0, (group.max_size if group.max_size is not None else desired) - desired)
                extra = min(headroom, max(0, self.min_in_service + leaving - in_service))
                # ...and take fewer instances out when MaxSize leaves no room (one at least, or the
                # roll would never end).
                allowed = max(1, in_service + extra - self.min_in_service)
                if leaving > allowed:
                    batch = [s for s in batch if s.lifecycle_state == "InService"][:allowed]
                    leaving = len(batch)
                target = min(in_service + extra, self.min_in_service + leaving)
                if extra:
                    group.set_desired_capacity(desired + extra)
            if extra and not self.wait_until(lambda: self.in_service() >= target):
                return
            with STATE_LOCK:
                if not _group_live(group):
                    return
                for state in batch:
                    _begin_termination(group, state)
                # The terminating instances no longer count: their replacements launch now.
                group.set_desired_capacity(group.desired_capacity)
            ids = {s.instance.id for s in batch}
            if not self.wait_until(lambda: not any(s.instance.id in ids for s in group.instance_states)):
                return
            if extra:
                with STATE_LOCK:
                    if not _group_live(group):
                        return
                    group.set_desired_capacity(group.desired_capacity - extra)
            # The batch is done when its replacements are in service and the instances it scaled
            # back (if any) have gone through their hooks.
            if not self.wait_until(self.settled):
                return
            # PauseTime after each batch, for the new instances to start their software.
            time.sleep(EMULATION.seconds(self.pause))

    def settled(self) -> bool:
        return not any(
            str(s.lifecycle_state).startswith(("Pending", "Terminating")) for s in self.group.instance_states
        )


def patch_rolling_updates() -> None:
    """moto 5.2.5 ignores the ``UpdatePolicy`` attribute: after a stack update that changes a
    group's launch template version the instances stay on the old version, and the stack is
    ``UPDATE_COMPLETE`` at once. CloudFormation ("UpdatePolicy attribute",
    ``AutoScalingRollingUpdate``) replaces the instances when the launch template, launch
    configuration or subnets change: in batches of ``MaxBatchSize`` (default 1), keeping
    ``MinInstancesInService`` (default 0) instances in service (launching extra ones first when a
    batch would go below it), waiting ``PauseTime`` (ISO-8601, default PT0S) after each batch;
    each replaced instance goes through the terminating lifecycle hooks (``Terminating:Wait``
    until completed or timed out) and each new one through the launching hooks. The stack stays
    ``UPDATE_IN_PROGRESS`` until every group has rolled, then becomes ``UPDATE_COMPLETE``; an
    ``UpdateStack`` meanwhile fails with ``ValidationError: Stack:<id> is in UPDATE_IN_PROGRESS
    state and can not be updated.``, a ``DeleteStack`` with ``ValidationError: Stack [<id>]
    cannot be deleted while in status UPDATE_IN_PROGRESS``. The roll runs in a background thread under ``STATE_LOCK`` so
    that clients can complete lifecycle actions while the stack updates. The groups of one stack
    roll one after another, in template order (the control-plane stack chains its groups with
    DependsOn for the same effect).

    Not emulated: ``MinSuccessfulInstancesPercent``, ``WaitOnResourceSignals``,
    ``SuspendProcesses``, ``AutoScalingReplacingUpdate``, ``AutoScalingScheduledAction``,
    ``MinActiveInstancesPercent``, cancelling an update and rollback: a roll that fails (a moto
    error) leaves the stack ``UPDATE_ROLLBACK_FAILED`` without rolling anything back. Change sets
    (``ExecuteChangeSet``) update groups in place but do not roll them."""
    from moto.cloudformation import models as cfn_models
    from moto.cloudformation import responses as cfn_responses
    from moto.cloudformation.exceptions import ValidationError

    stack_cls = _require(cfn_models, "Stack")
    original_update = _require(stack_cls, "update")
    _require(stack_cls, "_add_stack_event")
    response_cls = _require(cfn_responses, "CloudFormationResponse")
    _require(response_cls, "_validate_status")
    original_delete = _require(response_cls, "delete_stack")
    # CloudFormation deletes a stack being created (it cancels the creation) but not one being
    # updated: "Stack [<id>] cannot be deleted while in status UPDATE_IN_PROGRESS".
    UPDATING = ("UPDATE_IN_PROGRESS", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS",
                "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS")

    def update(self: Any, template: str, role_arn: Any = None, parameters: Any = None, tags: Any = None) -> None:
        ROLLS.pending = []
        try:
            original_update(self, template, role_arn, parameters, tags)
            rolls = ROLLS.pending
        finally:
            ROLLS.pending = None
        if not rolls:
            return
        # moto marked the update complete; CloudFormation is still replacing instances.
        if self.events and self.events[-1].resource_status == "UPDATE_COMPLETE":
            self.events.pop()
        self.status = "UPDATE_IN_PROGRESS"
        threading.Thread(target=run_rolls, args=(self, rolls), name=f"rolls-{self.name}", daemon=True).start()

    def run_rolls(stack: Any, rolls: list[RollingUpdate]) -> None:
        failure = None
        for roll in rolls:
            try:
                roll.run()
            except Exception as err:  # noqa: BLE001 - reported as the stack's failure
                failure = f"{roll.logical_id}: {type(err).__name__}: {err}"
                break
        with STATE_LOCK:
            if stack.status != "UPDATE_IN_PROGRESS":
                return  # deleted meanwhile
            if failure is None:
                stack._add_stack_event("UPDATE_COMPLETE")
                stack.status = "UPDATE_COMPLETE"
            else:
                stack._add_stack_event("UPDATE_ROLLBACK_FAILED", resource_status_reason=failure)
                stack.status = "UPDATE_ROLLBACK_FAILED"

    def validate_status(self: Any, stack: Any) -> None:
        settled_badly = ("ROLLBACK_COMPLETE", "UPDATE_ROLLBACK_FAILED")
        if str(stack.status).endswith("_IN_PROGRESS") or stack.status in settled_badly:
            raise ValidationError(
                stack.stack_id, message=f"Stack:{stack.stack_id} is in {stack.status} state and can not be updated."
            )

    def delete_stack(self: Any) -> Any:
        name_or_id = self._get_param("StackName")
        for stack in self.cloudformation_backend.stacks.values():
            if name_or_id in (stack.stack_id, stack.name) and stack.status in UPDATING:
                raise ValidationError(
                    stack.stack_id, message=f"Stack [{stack.stack_id}] cannot be deleted while in status {stack.status}"
                )
        return original_delete(self)

    stack_cls.update = update
    response_cls._validate_status = validate_status
    response_cls.delete_stack = delete_stack


# --- 14. A stack delete drains its Auto Scaling groups (opt-in) ---------------------------------


def patch_group_deletion_hooks() -> None:
    """moto 5.2.5 deletes a stack's Auto Scaling groups at once: their instances are terminated
    without passing through the terminating lifecycle hooks, and the stack is gone when
    ``DeleteStack`` returns. CloudFormation scales a group it deletes to zero and waits for its
    instances to terminate, so each instance goes through ``Terminating:Wait`` (this is why the
    node pools declare their hook inside the group rather than as a separate
    ``AWS::AutoScaling::LifecycleHook``, which would be deleted first); meanwhile the stack is
    ``DELETE_IN_PROGRESS``, a repeated ``DeleteStack`` changes nothing and ``UpdateStack`` is
    refused. With the emulation setting ``group_deletion_hooks`` on, the emulator does the same:
    the groups that have instances and a terminating hook start terminating every instance, the
    stack is ``DELETE_IN_PROGRESS`` until they are empty (hooks completed or timed out), then the
    stack's resources are deleted as before and the stack is ``DELETE_COMPLETE``. A delete that
    then fails leaves the stack ``DELETE_FAILED``. Off by default: the instances are terminated
    at once, as moto does."""
    from moto.autoscaling import models as asg_models
    from moto.cloudformation import models as cfn_models

    group_cls = _require(asg_models, "FakeAutoScalingGroup")
    backend_cls = _require(cfn_models, "CloudFormationBackend")
    original_delete = _require(backend_cls, "delete_stack")
    _require(cfn_models.Stack, "_add_stack_event")

    def live_stack(backend: Any, name_or_id: str) -> Any:
        if name_or_id in backend.stacks:
            return backend.stacks[name_or_id]
        return next((s for s in backend.stacks.values() if s.name == name_or_id), None)

    def draining(stack: Any) -> list[Any]:
        parsed = getattr(stack.resource_map, "_parsed_resources", {}) or {}
        return [
            r
            for r in list(parsed.values())
            if isinstance(r, group_cls) and _group_live(r) and r.instance_states and _hooks_of(r, TERMINATING)
        ]

    def delete_stack(self: Any, name_or_stack_id: str) -> None:
        stack = live_stack(self, name_or_stack_id)
        if stack is not None and stack.status == "DELETE_IN_PROGRESS":
            return  # already being deleted: AWS accepts the repeated call
        groups = draining(stack) if stack is not None and EMULATION.group_deletion_hooks else []
        if not groups:
            return original_delete(self, name_or_stack_id)
        stack._add_stack_event("DELETE_IN_PROGRESS", resource_status_reason="User Initiated")
        stack.status = "DELETE_IN_PROGRESS"
        for group in groups:
            group.min_size = 0
            group.desired_capacity = 0
            for state in list(group.instance_states):
                _begin_termination(group, state)
        threading.Thread(
            target=finish, args=(self, stack, groups), name=f"delete-{stack.name}", daemon=True
        ).start()

    def finish(backend: Any, stack: Any, groups: list[Any]) -> None:
        while True:
            with STATE_LOCK:
                if backend.stacks.get(stack.stack_id) is not stack:
                    return  # the server was reset
                if all(not _group_live(g) or not g.instance_states for g in groups):
                    events = len(stack.events)
                    try:
                        original_delete(backend, stack.stack_id)
                    except Exception as err:  # noqa: BLE001 - reported as the stack's failure
                        # moto dropped the stack before failing; AWS keeps it, DELETE_FAILED.
                        backend.stacks[stack.stack_id] = stack
                        backend.deleted_stacks.pop(stack.stack_id, None)
                        stack._add_stack_event("DELETE_FAILED", resource_status_reason=f"{type(err).__name__}: {err}")
                        stack.status = "DELETE_FAILED"
                    # moto's delete logs its own DELETE_IN_PROGRESS; the stack already has one.
                    if len(stack.events) > events and stack.events[events].resource_status == "DELETE_IN_PROGRESS":
                        del stack.events[events]
                    return
            time.sleep(0.1)

    backend_cls.delete_stack = delete_stack

# --- 15. A security group in use can not be deleted ----------------------------------------------


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


# --- 16. A hosted zone is deleted with its stack, once it is empty -------------------------------


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


# --- 17. A stack's load balancers where and as the template puts them -------------------------


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


# --- 18. Stack drift detection ----------------------------------------------------------------


DRIFT_DETECTION_SECONDS = 10.0
"""How long a drift detection stays ``DETECTION_IN_PROGRESS``, in AWS seconds (scaled by the time
scale, see ``Emulation``): AWS takes seconds to minutes, and a caller has to poll."""

DRIFT_DETECTIONS_KEPT = 1000
"""Detections remembered per account and region, so a long-running server stays bounded."""

DRIFT_CHECKED_TYPES = (
    "AWS::EC2::SecurityGroup",
    "AWS::EC2::SecurityGroupIngress",
    "AWS::EC2::Route",
    "AWS::AutoScaling::AutoScalingGroup",
)
"""The resource types whose drift the emulator detects; a stack's other resources are not
checked and, as in AWS for types without drift support, not listed by
``DescribeStackResourceDrifts``."""

DRIFT_STACK_STATUSES = (
    "CREATE_COMPLETE",
    "UPDATE_COMPLETE",
    "UPDATE_ROLLBACK_COMPLETE",
    "UPDATE_ROLLBACK_FAILED",
    "IMPORT_COMPLETE",
    "IMPORT_ROLLBACK_COMPLETE",
)
"""The stack statuses in which CloudFormation detects drift; others are refused."""

_PROTOCOLS = {"6": "tcp", "17": "udp", "1": "icmp", "all": "-1", "-1": "-1"}


def _rule_key(rule: dict[str, Any]) -> tuple[Any, ...]:
    """What tells two security-group rules apart: protocol, ports and peer. ``Description`` is
    left out: moto drops the descriptions of a template's inline rules, so comparing them would
    report every described rule as drifted."""
    protocol = str(rule.get("IpProtocol", "")).lower()
    protocol = _PROTOCOLS.get(protocol, protocol)
    ports = (None, None) if protocol == "-1" else (_int_or(rule.get("FromPort")), _int_or(rule.get("ToPort")))
    for peer in ("CidrIp", "CidrIpv6", "SourceSecurityGroupId", "DestinationSecurityGroupId",
                 "SourcePrefixListId", "DestinationPrefixListId", "CidrIpv6"):
        if rule.get(peer):
            return (protocol, *ports, peer, str(rule[peer]))
    return (protocol, *ports, "", "")


def _int_or(value: Any) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _rule_of(rule: Any, egress: bool) -> dict[str, Any]:
    """A live moto rule as the template writes it (``AWS::EC2::SecurityGroup`` ``Ingress`` /
    ``Egress`` property)."""
    out: dict[str, Any] = {"IpProtocol": rule.ip_protocol}
    if rule.ip_protocol != "-1":
        out["FromPort"], out["ToPort"] = rule.from_port, rule.to_port
    if rule.ip_range.get("CidrIp"):
        out["CidrIp"] = rule.ip_range["CidrIp"]
    if rule.ip_range.get("CidrIpv6"):
        out["CidrIpv6"] = rule.ip_range["CidrIpv6"]
    if rule.source_group.get("GroupId"):
        out["DestinationSecurityGroupId" if egress else "SourceSecurityGroupId"] = rule.source_group["GroupId"]
    if rule.prefix_list_id:
        out["DestinationPrefixListId" if egress else "SourcePrefixListId"] = rule.prefix_list_id
    if rule.ip_range.get("Description"):
        out["Description"] = rule.ip_range["Description"]
    return out


def _dump(value: Any) -> str:
    """A property value as AWS writes it in a ``PropertyDifference``: JSON for objects and lists,
    the text itself for scalars."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class _Drift:
    """One resource's drift, as ``StackResourceDrift``."""

    def __init__(self, stack: Any, logical_id: str, resource_type: str, physical_id: str,
                 expected: dict[str, Any]) -> None:
        self.stack, self.logical_id, self.resource_type = stack, logical_id, resource_type
        self.physical_id, self.expected, self.actual = physical_id, expected, copy.deepcopy(expected)
        self.status = "IN_SYNC"
        self.differences: list[dict[str, str]] = []

    def deleted(self) -> "_Drift":
        self.status, self.actual = "DELETED", None
        return self

    def differ(self, path: str, expected: Any, actual: Any, kind: str) -> None:
        self.status = "MODIFIED"
        self.differences.append({
            "PropertyPath": path,
            "ExpectedValue": "null" if expected is None else _dump(expected),
            "ActualValue": "null" if actual is None else _dump(actual),
            "DifferenceType": kind,
        })

    def as_dict(self, timestamp: Any) -> dict[str, Any]:
        out: dict[str, Any] = {
            "StackId": self.stack.stack_id,
            "LogicalResourceId": self.logical_id,
            "ResourceType": self.resource_type,
            "ExpectedProperties": json.dumps(self.expected, sort_keys=True),
            "StackResourceDriftStatus": self.status,
            "PropertyDifferences": list(self.differences),
            "Timestamp": timestamp,
        }
        if self.physical_id:
            out["PhysicalResourceId"] = self.physical_id
        if self.actual is not None:
            out["ActualProperties"] = json.dumps(self.actual, sort_keys=True)
        return out


def _standalone_ingress(account_id: str, region: str) -> dict[str, set[tuple[Any, ...]]]:
    """The rules that ``AWS::EC2::SecurityGroupIngress`` resources of the account's stacks put on
    each group (by group id): CloudFormation manages them, so they are not drift of the group."""
    from moto.cloudformation.models import cloudformation_backends
    from moto.ec2.models import security_groups

    out: dict[str, set[tuple[Any, ...]]] = {}
    backend = cloudformation_backends[account_id][region]
    for stack in list(backend.stacks.values()):
        for resource in list(stack.resource_map._parsed_resources.values()):
            if isinstance(resource, security_groups.SecurityGroupIngress):
                out.setdefault(resource.security_group.id, set()).add(_rule_key(resource.properties))
    return out


def _group_drift(drift: _Drift, ec2: Any, managed: dict[str, set[tuple[Any, ...]]]) -> _Drift:
    group = ec2.get_security_group_from_id(drift.physical_id) if drift.physical_id else None
    if group is None:
        return drift.deleted()
    elsewhere = managed.get(group.id, set())
    for prop, rules, egress in (("SecurityGroupIngress", group.ingress_rules, False),
                                ("SecurityGroupEgress", group.egress_rules, True)):
        # Without egress rules in the template a group keeps AWS's default allow-all egress
        # rule, which is not drift.
        if prop not in drift.expected and egress:
            continue
        expected = list(drift.expected.get(prop) or [])
        actual = [_rule_of(r, egress) for r in list(rules)]
        actual = [r for r in actual if egress or _rule_key(r) not in elsewhere
                  or any(_rule_key(e) == _rule_key(r) for e in expected)]
        if expected or actual:
            drift.actual[prop] = actual
        wanted = [_rule_key(r) for r in expected]
        have = [_rule_key(r) for r in actual]
        for i, rule in enumerate(actual):
            if _rule_key(rule) not in wanted:
                drift.differ(f"/{prop}/{i}", None, rule, "ADD")
        for i, rule in enumerate(expected):
            if _rule_key(rule) not in have:
                drift.differ(f"/{prop}/{i}", rule, None, "REMOVE")
    return drift


def _ingress_drift(drift: _Drift, ec2: Any) -> _Drift:
    p = drift.expected
    group_id = p.get("GroupId") or ""
    group = ec2.get_security_group_by_name_or_id(group_id or p.get("GroupName"), None) if (
        group_id or p.get("GroupName")) else None
    if group is None:
        return drift.deleted()
    key = _rule_key(p)
    if not any(_rule_key(_rule_of(r, False)) == key for r in list(group.ingress_rules)):
        return drift.deleted()
    return drift


_ROUTE_TARGETS = {
    "GatewayId": lambda r: getattr(r.gateway, "id", None),
    "NatGatewayId": lambda r: getattr(r.nat_gateway, "id", None),
    "VpcPeeringConnectionId": lambda r: getattr(r.vpc_pcx, "id", None),
    "InstanceId": lambda r: getattr(r.instance, "id", None),
    "NetworkInterfaceId": lambda r: getattr(r.interface, "id", None),
    "TransitGatewayId": lambda r: getattr(r.transit_gateway, "id", None),
    "VpcEndpointId": lambda r: r.vpc_endpoint_id,
}


def _route_drift(drift: _Drift, ec2: Any) -> _Drift:
    p = drift.expected
    table = ec2.route_tables.get(p.get("RouteTableId") or "")
    destination = p.get("DestinationCidrBlock")
    destination6 = p.get("DestinationIpv6CidrBlock")
    route = None
    if table is not None:
        for candidate in list(table.routes):
            if (destination and candidate.destination_cidr_block == destination) or (
                destination6 and candidate.destination_ipv6_cidr_block == destination6
            ):
                route = candidate
                break
    if route is None:
        return drift.deleted()
    drift.physical_id = drift.physical_id or route.id
    for key, read in _ROUTE_TARGETS.items():
        actual = read(route)
        if key in p and p[key] != actual:
            drift.differ(f"/{key}", p[key], actual, "NOT_EQUAL" if actual is not None else "REMOVE")
            drift.actual[key] = actual
        elif key not in p and actual is not None:
            # The route now points elsewhere than the template says.
            drift.differ(f"/{key}", None, actual, "NOT_EQUAL")
            drift.actual[key] = actual
    return drift


def _group_size_drift(drift: _Drift, account_id: str, region: str) -> _Drift:
    from moto.autoscaling.models import autoscaling_backends

    group = autoscaling_backends[account_id][region].autoscaling_groups.get(drift.physical_id)
    if group is None:
        return drift.deleted()
    p = drift.expected
    for key, actual in (("MinSize", group.min_size), ("MaxSize", group.max_size),
                        ("DesiredCapacity", group.desired_capacity)):
        if key in p and str(p[key]) != str(actual):
            drift.differ(f"/{key}", str(p[key]), str(actual), "NOT_EQUAL")
            drift.actual[key] = str(actual)
    template = getattr(group, "ec2_launch_template", None)
    for base in (("LaunchTemplate",), ("MixedInstancesPolicy", "LaunchTemplate", "LaunchTemplateSpecification")):
        spec: Any = p
        for part in base:
            spec = spec.get(part) if isinstance(spec, dict) else None
        if not isinstance(spec, dict):
            continue
        actual_spec: Any = drift.actual
        for part in base:
            actual_spec = actual_spec[part]
        live = {"LaunchTemplateId": getattr(template, "id", None), "Version": getattr(group, "launch_template_version", None)}
        for key, actual in live.items():
            if key in spec and str(spec[key]) != str(actual):
                drift.differ("/" + "/".join((*base, key)), str(spec[key]), str(actual), "NOT_EQUAL")
                actual_spec[key] = str(actual)
    return drift


def detect_drift(stack: Any, account_id: str, region: str, only: str | None = None) -> list[_Drift]:
    """The drift of each checked resource of ``stack`` (or of resource ``only``), comparing the
    template's properties (parameters and references resolved) with moto's live state."""
    from moto.cloudformation.parsing import clean_json
    from moto.ec2.models import ec2_backends

    ec2 = ec2_backends[account_id][region]
    resource_map = stack.resource_map
    managed = _standalone_ingress(account_id, region)
    out = []
    for logical_id, resource_json in list(resource_map._resource_json_map.items()):
        if only is not None and logical_id != only:
            continue
        resource_type = resource_json.get("Type", "")
        if resource_type not in DRIFT_CHECKED_TYPES or logical_id not in resource_map._parsed_resources:
            continue  # not checked (a type without drift support, or a false Condition)
        model = resource_map._parsed_resources[logical_id]
        try:
            expected = clean_json(copy.deepcopy(resource_json.get("Properties") or {}), resource_map)
        except Exception:  # noqa: BLE001 - a template moto can not resolve is not checked
            continue
        physical = getattr(model, "physical_resource_id", "") or ""
        drift = _Drift(stack, logical_id, resource_type, physical if isinstance(physical, str) else "", expected)
        if resource_type == "AWS::EC2::SecurityGroup":
            out.append(_group_drift(drift, ec2, managed))
        elif resource_type == "AWS::EC2::SecurityGroupIngress":
            out.append(_ingress_drift(drift, ec2))
        elif resource_type == "AWS::EC2::Route":
            out.append(_route_drift(drift, ec2))
        else:
            out.append(_group_size_drift(drift, account_id, region))
    return out


class DriftDetection:
    """One ``DetectStackDrift``: its result is taken when it starts (moto's state does not move
    under a detection), and reported once ``DRIFT_DETECTION_SECONDS`` (scaled) have passed."""

    def __init__(self, stack: Any, drifts: list[_Drift]) -> None:
        from moto.core.utils import utcnow
        from moto.moto_api._internal import mock_random

        self.id = str(mock_random.uuid4())
        self.stack_id = stack.stack_id
        self.timestamp = utcnow()
        self.ready_at = time.monotonic() + EMULATION.seconds(DRIFT_DETECTION_SECONDS)
        self.drifts = [d.as_dict(self.timestamp) for d in drifts]

    def complete(self) -> bool:
        return time.monotonic() >= self.ready_at

    def drifted(self) -> int:
        return sum(1 for d in self.drifts if d["StackResourceDriftStatus"] in ("MODIFIED", "DELETED"))


def patch_drift_detection() -> None:
    """moto 5.2.5 answers ``DetectStackDrift``, ``DescribeStackDriftDetectionStatus``,
    ``DescribeStackResourceDrifts`` and ``DetectStackResourceDrift`` with 500 NotImplemented.
    They are implemented as AWS documents them, for the resource types people change by hand
    in the cluster stacks (``DRIFT_CHECKED_TYPES``): a security group's inline ingress (and, when
    the template has them, egress) rules, a standalone ingress rule, a route, and an Auto
    Scaling group's MinSize, MaxSize, DesiredCapacity and launch template id and version.

    - ``DetectStackDrift`` returns a ``StackDriftDetectionId``; the stack must be in a stable
      status (``DRIFT_STACK_STATUSES``), else ``ValidationError``.
    - ``DescribeStackDriftDetectionStatus`` answers ``DETECTION_IN_PROGRESS`` (StackDriftStatus
      absent) for ``DRIFT_DETECTION_SECONDS`` (scaled), then ``DETECTION_COMPLETE`` with
      ``DRIFTED`` or ``IN_SYNC`` and ``DriftedStackResourceCount``.
    - ``DescribeStackResourceDrifts`` lists the checked resources of the stack's latest
      completed detection (status filters, ``MaxResults``/``NextToken``): ``IN_SYNC``,
      ``MODIFIED`` with ``PropertyDifferences`` (``ADD`` for a rule added to a group, ``REMOVE``
      for one taken away, ``NOT_EQUAL`` for a changed value), or ``DELETED`` (a route, rule or
      group that is gone); ``ExpectedProperties``/``ActualProperties`` are JSON strings.
    - ``DetectStackResourceDrift`` answers one resource's drift at once.

    Rules that an ``AWS::EC2::SecurityGroupIngress`` of any stack of the account puts on a group
    are managed by CloudFormation and not reported as drift of the group. Rule descriptions are
    not compared (moto does not keep those of inline rules)."""
    from moto.cloudformation import responses as cfn_responses
    from moto.cloudformation.exceptions import ValidationError
    from moto.core.responses import ActionResult

    response_cls = _require(cfn_responses, "CloudFormationResponse")
    for name in ("detect_stack_drift", "describe_stack_drift_detection_status", "describe_stack_resource_drifts"):
        if name in vars(response_cls):
            raise PatchError(f"moto now implements {name}; review correction 18 of tools/moto/server.py")
    detections: dict[tuple[str, str], dict[str, DriftDetection]] = {}
    latest: dict[tuple[str, str, str], str] = {}

    def live_stack(self: Any) -> Any:
        name = self._get_param("StackName")
        backend = self.cloudformation_backend
        stack = backend.get_stack(name)  # ValidationError "Stack with id … does not exist"
        if stack.stack_id in backend.deleted_stacks and stack.stack_id not in backend.stacks:
            raise ValidationError(name)
        return stack

    def key(self: Any) -> tuple[str, str]:
        return (self.current_account, self.region)

    def detect_stack_drift(self: Any) -> Any:
        stack = live_stack(self)
        if stack.status not in DRIFT_STACK_STATUSES:
            raise ValidationError(
                message=f"Drift detection is not supported for stack [{stack.name}] in status {stack.status}"
            )
        only = self._get_param("LogicalResourceIds") or None
        drifts = [d for d in detect_drift(stack, self.current_account, self.region)
                  if only is None or d.logical_id in only]
        detection = DriftDetection(stack, drifts)
        known = detections.setdefault(key(self), {})
        known[detection.id] = detection
        # Bounded: the oldest detections are forgotten (AWS, too, keeps them for a while only).
        while len(known) > DRIFT_DETECTIONS_KEPT:
            known.pop(next(iter(known)))
        latest[(*key(self), stack.stack_id)] = detection.id
        return ActionResult({"StackDriftDetectionId": detection.id})

    def describe_stack_drift_detection_status(self: Any) -> Any:
        wanted = self._get_param("StackDriftDetectionId")
        detection = detections.get(key(self), {}).get(wanted)
        if detection is None:
            raise ValidationError(message=f"Drift detection [{wanted}] does not exist")
        out: dict[str, Any] = {
            "StackId": detection.stack_id,
            "StackDriftDetectionId": detection.id,
            "Timestamp": detection.timestamp,
        }
        if detection.complete():
            drifted = detection.drifted()
            out.update({
                "DetectionStatus": "DETECTION_COMPLETE",
                "StackDriftStatus": "DRIFTED" if drifted else "IN_SYNC",
                "DriftedStackResourceCount": drifted,
                "DetectionStatusReason": "Stack drift detection completed successfully",
            })
        else:
            out["DetectionStatus"] = "DETECTION_IN_PROGRESS"
        return ActionResult(out)

    def describe_stack_resource_drifts(self: Any) -> Any:
        stack = live_stack(self)
        ids = [latest.get((*key(self), stack.stack_id))]
        detection = detections.get(key(self), {}).get(ids[0] or "")
        drifts = detection.drifts if detection is not None and detection.complete() else []
        filters = self._get_param("StackResourceDriftStatusFilters") or []
        if filters:
            drifts = [d for d in drifts if d["StackResourceDriftStatus"] in filters]
        start = int(self._get_param("NextToken") or 0)
        size = int(self._get_param("MaxResults") or 100)
        page = drifts[start:start + size]
        out: dict[str, Any] = {"StackResourceDrifts": page}
        if start + size < len(drifts):
            out["NextToken"] = str(start + size)
        return ActionResult(out)

    def detect_stack_resource_drift(self: Any) -> Any:
        stack = live_stack(self)
        logical_id = self._get_param("LogicalResourceId")
        if logical_id not in stack.resource_map._resource_json_map:
            raise ValidationError(message=f"Resource [{logical_id}] does not exist in stack [{stack.name}]")
        drifts = detect_drift(stack, self.current_account, self.region, only=logical_id)
        if not drifts:
            raise ValidationError(
                message=f"Drift detection is not supported for resource [{logical_id}] in stack [{stack.name}]"
            )
        from moto.core.utils import utcnow

        return ActionResult({"StackResourceDrift": drifts[0].as_dict(utcnow())})

    response_cls.detect_stack_drift = detect_stack_drift
    response_cls.describe_stack_drift_detection_status = describe_stack_drift_detection_status
    response_cls.describe_stack_resource_drifts = describe_stack_resource_drifts
    response_cls.detect_stack_resource_drift = detect_stack_resource_drift


# --- 19. ExecuteChangeSet updates a stack as UpdateStack does -------------------------------------


def patch_execute_change_set() -> None:
    """moto 5.2.5 executes an ``UPDATE`` change set by applying its resources and copying its
    template, without the rest of an update: the stack's ``Outputs`` keep their old values (AWS
    recomputes them), its tags stay (AWS applies the change set's), an Auto Scaling group's
    rolling update (correction 13) is skipped, and every change set of the stack stays listed
    (AWS deletes the stack's change sets once one is executed: they no longer describe a
    possible update). The operator's own ``TemplateHash`` output is how it knows a stack is
    current, so stale outputs made an approved update look unapplied forever. A ``CREATE``
    change set keeps moto's path. Deleting a change set that does not exist gave 500 (an
    unbound variable); AWS answers 404 ``ChangeSetNotFound``."""
    from moto.cloudformation import models as cfn_models
    from moto.cloudformation.exceptions import CloudFormationError

    backend_cls = _require(cfn_models, "CloudFormationBackend")
    original_execute = _require(backend_cls, "execute_change_set")
    original_delete = _require(backend_cls, "delete_change_set")
    _require(cfn_models.Stack, "update")

    class ChangeSetNotFound(CloudFormationError):
        # The code is the one AWS's model names (ChangeSetNotFoundException, 404 in its
        # error metadata); the serializer takes the status from the model.
        code = "ChangeSetNotFound"

    def find(backend: Any, name: str) -> Any:
        if name in backend.change_sets:
            return backend.change_sets[name]
        return next((cs for cs in backend.change_sets.values() if cs.change_set_name == name), None)

    def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        change_set = find(self, change_set_name)
        if change_set is None or change_set.change_set_type != "UPDATE":
            return original_execute(self, change_set_name, stack_name)
        stack = self.stacks[change_set.stack_id]
        # Stack.update (as patched by 12 and 13) sets the events, status, outputs and rolls.
        stack.update(change_set.template, change_set.role_arn, parameters=change_set.parameters or None,
                     tags=change_set.tags)
        change_set.execution_status = "EXECUTE_COMPLETE"
        for cs_id in [k for k, cs in self.change_sets.items() if cs.stack_id == stack.stack_id]:
            del self.change_sets[cs_id]

    def delete_change_set(self: Any, change_set_name: str) -> None:
        if find(self, change_set_name) is None:
            raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
        original_delete(self, change_set_name)

    backend_cls.execute_change_set = execute_change_set
    backend_cls.delete_change_set = delete_change_set


# --- 20. S3 Object Ownership: new buckets have ACLs disabled ---------------------------------------


def patch_bucket_owner_enforced() -> None:
    """Since April 2023 every new S3 bucket has Object Ownership ``BucketOwnerEnforced``: ACLs
    are disabled, and a request that sets one (``PutBucketAcl``) is refused with 400
    ``AccessControlListNotSupported``, "The bucket does not allow ACLs"; access, including the
    server access logs' delivery, is granted by bucket policy instead (Amazon S3 User Guide,
    "Controlling ownership of objects and disabling ACLs for your bucket" and "Enabling Amazon S3
    server access logging"). moto 5.2.5 leaves a new bucket without an ownership setting and
    accepts every ACL, so granting log delivery through ``PutBucketAcl`` passed here and failed
    on AWS. Now a bucket created without ``x-amz-object-ownership`` is ``BucketOwnerEnforced``,
    and ``PutBucketAcl`` on a bucket that is refuses as AWS does. Buckets created with
    ``ObjectWriter`` or ``BucketOwnerPreferred``, or switched to them with
    ``PutBucketOwnershipControls``, keep accepting ACLs."""
    from moto.s3 import models as s3_models
    from moto.s3.exceptions import S3ClientError

    backend_cls = _require(s3_models, "S3Backend")
    original_create = _require(backend_cls, "create_bucket")
    original_put_acl = _require(backend_cls, "put_bucket_acl")
    _require(s3_models.FakeBucket, "__init__")

    def create_bucket(self: Any, bucket_name: str, *args: Any, **kwargs: Any) -> Any:
        bucket = original_create(self, bucket_name, *args, **kwargs)
        # The CreateBucket handler overwrites this when the request names an ownership.
        bucket.ownership_rule = "BucketOwnerEnforced"
        return bucket

    def put_bucket_acl(self: Any, bucket_name: str, acl: Any) -> None:
        if self.get_bucket(bucket_name).ownership_rule == "BucketOwnerEnforced":
            raise S3ClientError("AccessControlListNotSupported", "The bucket does not allow ACLs")
        original_put_acl(self, bucket_name, acl)

    backend_cls.create_bucket = create_bucket
    backend_cls.put_bucket_acl = put_bucket_acl



def _kms_action_matches(actions: Any, action: str) -> bool:
    import fnmatch

    listed = [actions] if isinstance(actions, str) else list(actions or [])
    return any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in listed if isinstance(a, str))


def _kms_principal_is_account(principal: Any, account_id: str) -> bool:
    if principal == "*":
        return True
    if isinstance(principal, dict):
        principal = principal.get("AWS", [])
    listed = [principal] if isinstance(principal, str) else list(principal or [])
    return any(p == "*" or p == account_id or p.endswith(f":iam::{account_id}:root") for p in listed)


def kms_policy_allows(policy_text: str, account_id: str, action: str) -> bool:
    """Whether a key policy lets the key's account (its IAM principals) perform ``action``: an
    ``Allow`` names ``*``, the account or its ``root``, and no ``Deny`` applies ("Key policies in
    AWS KMS": unless the key policy allows it, IAM policies cannot grant access to the key).
    Statements with a ``Condition`` are not evaluated: they neither allow nor deny."""
    try:
        policy = json.loads(policy_text)
    except (TypeError, ValueError):
        return True
    allowed = False
    for st in policy.get("Statement", []):
        if not isinstance(st, dict) or "Condition" in st:
            continue
        if not _kms_action_matches(st.get("Action"), action):
            continue
        effect = str(st.get("Effect", "")).lower()
        if effect == "deny":
            return False
        if effect == "allow" and _kms_principal_is_account(st.get("Principal"), account_id):
            allowed = True
    return allowed


def patch_kms_key_policy_reads() -> None:
    """Correction 21: ``DescribeKey`` and ``ListResourceTags`` answer ``AccessDeniedException``
    unless the key policy lets the account read the key."""
    from moto.kms import responses as kms_responses
    from moto.kms.exceptions import AccessDeniedException

    cls = _require(kms_responses, "KmsResponse")
    original_describe = _require(cls, "describe_key")
    original_tags = _require(cls, "list_resource_tags")

    def check(self: Any, action: str) -> None:
        key_id = self._get_param("KeyId")
        backend = self.kms_backend
        try:
            key = backend.describe_key(backend.get_key_id(key_id))
        except Exception:  # an unknown key: moto's own handler answers NotFoundException
            return
        if not kms_policy_allows(key.policy, key.account_id, action):
            raise AccessDeniedException(
                f"User is not authorized to perform: {action} on resource: {key.arn} "
                "because no resource-based policy allows the {action} action".replace("{action}", action)
            )

    def describe_key(self: Any) -> str:
        check(self, "kms:DescribeKey")
        return original_describe(self)

    def list_resource_tags(self: Any) -> str:
        check(self, "kms:ListResourceTags")
        return original_tags(self)

    cls.describe_key = describe_key
    cls.list_resource_tags = list_resource_tags


# --- 23. AssumeRoleWithWebIdentity checks the token as STS does --------------------------------

# The issuer forms the emulator can fetch documents from: an S3 bucket served by S3 itself
# (path style), the issuer form of the IRSA buckets outside CloudFront; and a CloudFront
# distribution (its domain or an alias) whose origin is an S3 bucket (virtual-hosted style).
_S3_ISSUER = __import__("re").compile(r"^https://s3[.-]([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([^/]+)(/.*)?$")
_S3_ORIGIN = __import__("re").compile(r"^([a-z0-9.-]+)\.s3(?:[.-][a-z0-9-]+)?\.amazonaws\.com(?:\.cn)?$")


class WebIdentityRefused(Exception):
    """Why STS refuses a web identity token: (code, message, HTTP status) as AWS answers."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _b64url(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _statement_lists(st: dict[str, Any], key: str) -> list[Any]:
    value = st.get(key, [])
    return [value] if isinstance(value, str) else list(value)


def _policy_allows_read(bucket: Any, partition: str, key_name: str, reader: dict[str, str] | None) -> bool:
    """Whether ``bucket``'s policy lets ``reader`` ``s3:GetObject`` the key: a public statement
    (unless the public access block stops public policies) lets anyone, ``reader`` ``None``
    included; besides, the CloudFront service
    principal for the distribution ``reader["source_arn"]`` (origin access control: AWS grants it
    under an ``AWS:SourceArn`` condition, which makes the policy non-public), or the origin access
    identity ``reader["oai"]``."""
    import fnmatch

    if not bucket.policy:
        return False
    block = bucket.public_access_block
    try:
        policy = json.loads(bucket.policy.decode() if isinstance(bucket.policy, bytes) else bucket.policy)
    except ValueError:
        return False
    arn = f"arn:{partition}:s3:::{bucket.name}/{key_name}"
    for st in policy.get("Statement", []):
        if not isinstance(st, dict) or st.get("Effect") != "Allow":
            continue
        if not any(fnmatch.fnmatchcase("s3:GetObject", a) for a in _statement_lists(st, "Action")):
            continue
        if not any(fnmatch.fnmatchcase(arn, r) for r in _statement_lists(st, "Resource")):
            continue
        principal = st.get("Principal")
        condition = st.get("Condition")
        public = principal == "*" or (isinstance(principal, dict) and principal.get("AWS") in ("*", ["*"]))
        if public and not condition and not (block and (block.restrict_public_buckets or block.block_public_policy)):
            return True  # everyone, CloudFront's readers included
        if reader is None:
            continue
        if "source_arn" in reader:
            services = principal.get("Service", []) if isinstance(principal, dict) else []
            services = [services] if isinstance(services, str) else services
            if "cloudfront.amazonaws.com" not in services:
                continue
            if not condition:
                return True
            if set(condition) == {"StringEquals"} and set(condition["StringEquals"]) <= {"AWS:SourceArn", "aws:SourceArn"}:
                wanted = list(condition["StringEquals"].values())[0]
                wanted = [wanted] if isinstance(wanted, str) else wanted
                if reader["source_arn"] in wanted:
                    return True
        elif "oai" in reader:
            aws = principal.get("AWS", []) if isinstance(principal, dict) else []
            aws = [aws] if isinstance(aws, str) else aws
            if f"arn:aws:iam::cloudfront:user/CloudFront Origin Access Identity {reader['oai']}" in aws and not condition:
                return True
    return False


def _cloudfront_origin(host: str) -> tuple[str, dict[str, str] | None] | None:
    """The S3 bucket behind the CloudFront distribution whose domain or alias is ``host``, and how
    the distribution reads it (its origin access control, its origin access identity, or
    anonymously); ``None`` when no enabled distribution answers for ``host``."""
    from moto.cloudfront.models import cloudfront_backends

    for account_id in list(cloudfront_backends.keys()):
        for partition in cloudfront_backends[account_id].keys():
            backend = cloudfront_backends[account_id][partition]
            for dist in list(backend.distributions.values()):
                config = dist.distribution_config
                aliases = (getattr(config, "Aliases", None) or {}).get("Items") or []
                if host != dist.domain_name and host not in aliases:
                    continue
                if str(getattr(config, "Enabled", "true")).lower() != "true":
                    return None
                target = config.DefaultCacheBehavior.target_origin_id
                origin = next((o for o in config.Origins["Items"] if o.id == target), None)
                match = _S3_ORIGIN.match(origin.domain_name) if origin else None
                if not match:
                    return None
                if getattr(origin, "origin_access_control_id", ""):
                    return match.group(1), {"source_arn": dist.arn}
                identity = getattr(origin, "s3_access_identity", "") or ""
                if identity:
                    return match.group(1), {"oai": identity.rsplit("/", 1)[-1]}
                return match.group(1), None
    return None


def _public_s3_object(url: str) -> bytes:
    """The object at ``url`` as STS gets it over the internet: from a bucket S3 serves, as an
    anonymous reader, only when the bucket's policy grants ``s3:GetObject`` to everyone and its
    public access block does not stop that policy (or the object is public-read and ACLs are not
    ignored); from a CloudFront distribution, as the distribution reads its S3 origin (through
    its origin access control or identity where it has one)."""
    from moto.s3.models import s3_backends

    refused = WebIdentityRefused(
        "InvalidIdentityToken", "Couldn't retrieve verification key from your identity provider,  please reference AssumeRoleWithWebIdentity documentation for requirements"
    )
    reader: dict[str, str] | None = None
    match = _S3_ISSUER.match(url)
    if match:
        bucket_name, key_name = match.group(2), (match.group(3) or "/").lstrip("/")
    else:
        host, _, path = url[len("https://") :].partition("/") if url.startswith("https://") else ("", "", "")
        origin = _cloudfront_origin(host) if host else None
        if origin is None:
            raise refused
        bucket_name, reader = origin
        key_name = path
    located = s3_backends.bucket_accounts.get(bucket_name)
    if not located:
        raise refused
    partition, owner = located
    bucket = s3_backends[owner][partition].buckets.get(bucket_name)
    key = bucket.keys.get(key_name) if bucket else None
    if key is None:
        raise refused
    block = bucket.public_access_block
    readable = _policy_allows_read(bucket, partition, key_name, reader)
    acl = getattr(key, "acl", None)
    if reader is None and acl is not None and getattr(acl, "public_read", False) and not (block and block.ignore_public_acls):
        readable = True
    if not readable:
        raise refused
    return key.value


def _verify_signature(alg: str, jwk: dict[str, Any], signed: bytes, signature: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    digest = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}[alg[2:]]
    as_int = lambda field: int.from_bytes(_b64url(jwk[field]), "big")  # noqa: E731
    try:
        if alg.startswith("RS") and jwk.get("kty") == "RSA":
            key = rsa.RSAPublicNumbers(as_int("e"), as_int("n")).public_key()
            key.verify(signature, signed, padding.PKCS1v15(), digest)
            return True
        if alg.startswith("ES") and jwk.get("kty") == "EC":
            curve = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}[jwk["crv"]]
            key = ec.EllipticCurvePublicNumbers(as_int("x"), as_int("y"), curve).public_key()
            half = len(signature) // 2
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big"))
            key.verify(der, signed, ec.ECDSA(digest))
            return True
    except (InvalidSignature, KeyError, ValueError):
        return False
    return False


def _condition_holds(condition: dict[str, Any], claims: dict[str, Any], host: str) -> bool | None:
    """A trust statement's condition over the token's claims: ``StringEquals`` and
    ``StringLike`` on ``<issuer>:sub``, ``<issuer>:aud`` and ``<issuer>:amr``. ``None`` when it
    names anything else: such a statement is not applied (it neither allows nor denies)."""
    import fnmatch

    for operator, pairs in condition.items():
        if operator not in ("StringEquals", "StringLike") or not isinstance(pairs, dict):
            return None
        for key, wanted in pairs.items():
            if not key.startswith(f"{host}:"):
                return None
            claim = key[len(host) + 1 :]
            if claim not in ("sub", "aud", "amr"):
                return None
            values = claims.get(claim)
            values = [values] if isinstance(values, str) else list(values or [])
            wanted = [wanted] if isinstance(wanted, str) else list(wanted)
            match = (lambda v, w: v == w) if operator == "StringEquals" else fnmatch.fnmatchcase
            if not any(match(v, w) for v in values for w in wanted):
                return False
    return True


def check_web_identity(role_arn: str, token: str, now: float) -> None:
    """Raise ``WebIdentityRefused`` unless STS would accept ``token`` for ``role_arn`` (AWS STS
    API Reference, AssumeRoleWithWebIdentity, and IAM User Guide, "Create an OpenID Connect
    (OIDC) identity provider in IAM"): the token is a JWT signed with RS256-512 or ES256-512;
    its ``iss`` names an IAM OIDC provider of the role's account; its ``aud`` is one of the
    provider's client ids; it has not expired; its signature verifies with a key of the JWKS the
    issuer's discovery document (``<iss>/.well-known/openid-configuration``) names, both fetched
    anonymously; and the role's trust policy allows ``sts:AssumeRoleWithWebIdentity`` to that
    provider under conditions the claims meet."""
    import fnmatch

    from moto.iam.models import iam_backends

    invalid = lambda message: WebIdentityRefused("InvalidIdentityToken", message)  # noqa: E731
    parts = token.split(".")
    if len(parts) != 3:
        raise invalid("The web identity token that was passed could not be validated by AWS: not a JWT")
    try:
        header = json.loads(_b64url(parts[0]))
        claims = json.loads(_b64url(parts[1]))
        signature = _b64url(parts[2])
    except ValueError as err:
        raise invalid(f"The web identity token that was passed could not be validated by AWS: {err}") from err
    alg = header.get("alg", "")
    if alg not in ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512"):
        raise invalid(f"Unsupported token signing algorithm {alg!r}")
    issuer = str(claims.get("iss", ""))
    if not issuer.startswith("https://"):
        raise invalid("Missing or invalid issuer (iss) in the web identity token")
    host = issuer[len("https://") :].rstrip("/")
    arn_parts = role_arn.split(":")
    if len(arn_parts) < 6:
        raise WebIdentityRefused("ValidationError", f"{role_arn} is not a role ARN")
    partition, account_id = arn_parts[1], arn_parts[4]
    iam = iam_backends[account_id][partition]
    provider_arn = f"arn:{partition}:iam::{account_id}:oidc-provider/{host}"
    provider = iam.open_id_providers.get(provider_arn)
    if provider is None:
        raise invalid(f"No OpenIDConnect provider found in your account for {issuer}")
    audiences = claims.get("aud")
    audiences = [audiences] if isinstance(audiences, str) else list(audiences or [])
    if not any(a in provider.client_id_list for a in audiences):
        raise invalid("Incorrect token audience")
    if not isinstance(claims.get("exp"), (int, float)) or claims["exp"] <= now:
        raise WebIdentityRefused("ExpiredTokenException", "Token is expired")
    discovery = json.loads(_public_s3_object(f"{issuer}/.well-known/openid-configuration"))
    keys = json.loads(_public_s3_object(str(discovery.get("jwks_uri", "")))).get("keys", [])
    candidates = [k for k in keys if "kid" not in header or k.get("kid") == header["kid"]]
    signed = f"{parts[0]}.{parts[1]}".encode()
    if not any(_verify_signature(alg, k, signed, signature) for k in candidates):
        raise invalid("The web identity token that was passed could not be validated by AWS: invalid signature")
    denied = WebIdentityRefused(
        "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity", status=403
    )
    try:
        role = iam.get_role_by_arn(role_arn)
    except Exception as err:  # moto's NotFound: STS answers AccessDenied for an unknown role
        raise denied from err
    trust = role.assume_role_policy_document
    trust = json.loads(trust) if isinstance(trust, str) else trust
    for st in (trust or {}).get("Statement", []):
        if not isinstance(st, dict) or st.get("Effect") != "Allow":
            continue
        actions = st.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if not any(fnmatch.fnmatchcase("sts:AssumeRoleWithWebIdentity", a) for a in actions):
            continue
        federated = (st.get("Principal") or {}).get("Federated", [])
        federated = [federated] if isinstance(federated, str) else federated
        if provider_arn not in federated:
            continue
        if _condition_holds(st.get("Condition", {}), claims, host):
            return
    raise denied


def patch_web_identity() -> None:
    """Correction 23: ``AssumeRoleWithWebIdentity`` hands out credentials only for a token STS
    would accept (``check_web_identity``). moto 5.2.5 accepted any string as a token for any
    role, so a role trusting the wrong issuer, audience or service account passed."""
    from moto.sts import responses as sts_responses
    from moto.sts.exceptions import STSClientError

    cls = _require(sts_responses, "TokenResponse")
    original = _require(cls, "assume_role_with_web_identity")

    def assume_role_with_web_identity(self: Any) -> Any:
        try:
            check_web_identity(self._get_param("RoleArn"), self._get_param("WebIdentityToken") or "", time.time())
        except WebIdentityRefused as refused:
            raise STSClientError(refused.code, refused.message) from None
        return original(self)

    cls.assume_role_with_web_identity = assume_role_with_web_identity


# --- 24. CloudFront distributions deploy, and are deleted only disabled and deployed ------------

CLOUDFRONT_DEPLOY_SECONDS = 5.0
"""How long a distribution stays ``InProgress`` after a change, in AWS seconds (scaled by the
time scale). AWS takes minutes; what matters to a client is that it must wait for ``Deployed``."""


def patch_cloudfront() -> None:
    """Correction 24: CloudFront as its API reference documents it, where moto 5.2.5 differs.

    - An origin keeps its ``OriginAccessControlId`` (moto dropped it, so a distribution read its
      bucket anonymously as far as anyone could tell).
    - A created or updated distribution is ``InProgress`` until deployed, then ``Deployed``
      (moto answered ``Deployed`` from the first read on and after every update).
    - ``DeleteDistribution`` refuses, with 409 ``DistributionNotDisabled``, a distribution that
      is enabled or whose last change is not deployed (moto deleted any).
    - ``DeleteOriginAccessControl`` refuses, with 409 ``OriginAccessControlInUse``, an origin
      access control a distribution's origin uses (moto deleted it).
    - Origin access identities, which moto lacks, are served (``_add_origin_access_identities``).
    """
    from moto.cloudfront import models as cf_models
    from moto.cloudfront.exceptions import CloudFrontException

    origin_cls = _require(cf_models, "Origin")
    dist_cls = _require(cf_models, "Distribution")
    backend_cls = _require(cf_models, "CloudFrontBackend")
    for name in ("create_distribution_with_tags", "update_distribution", "delete_distribution", "delete_origin_access_control"):
        _require(backend_cls, name)
    original_origin_init = origin_cls.__init__

    def origin_init(self: Any, origin: dict[str, Any]) -> None:
        original_origin_init(self, origin)
        self.origin_access_control_id = origin.get("OriginAccessControlId") or ""

    origin_cls.__init__ = origin_init

    def status(self: Any) -> str:
        deployed_at = getattr(self, "_deployed_at", 0.0)
        return "InProgress" if time.time() < deployed_at else "Deployed"

    def set_status(self: Any, value: str) -> None:
        self._deployed_at = 0.0 if value == "Deployed" else time.time() + EMULATION.seconds(CLOUDFRONT_DEPLOY_SECONDS)

    dist_cls.status = property(status, set_status)

    def deploying(method: Any) -> Any:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = method(self, *args, **kwargs)
            out[0].status = "InProgress"
            return out

        return wrapper

    backend_cls.create_distribution_with_tags = deploying(backend_cls.create_distribution_with_tags)
    backend_cls.update_distribution = deploying(backend_cls.update_distribution)
    original_delete = backend_cls.delete_distribution

    def delete_distribution(self: Any, distribution_id: str, if_match: bool) -> None:
        dist = self.distributions.get(distribution_id)
        if dist is not None and if_match:
            enabled = str(getattr(dist.distribution_config, "Enabled", "true")).lower() == "true"
            if enabled or dist.status != "Deployed":
                raise CloudFrontException(
                    "DistributionNotDisabled", "The distribution you are trying to delete has not been disabled."
                )
        original_delete(self, distribution_id, if_match)

    backend_cls.delete_distribution = delete_distribution
    original_delete_oac = backend_cls.delete_origin_access_control

    def delete_origin_access_control(self: Any, control_id: str) -> None:
        for dist in self.distributions.values():
            if any(getattr(o, "origin_access_control_id", "") == control_id for o in dist.distribution_config.Origins["Items"]):
                raise CloudFrontException(
                    "OriginAccessControlInUse", "The origin access control is in use."
                )
        original_delete_oac(self, control_id)

    backend_cls.delete_origin_access_control = delete_origin_access_control
    _add_origin_access_identities(cf_models, backend_cls)


def _add_origin_access_identities(cf_models: Any, backend_cls: Any) -> None:
    """The origin access identity API moto 5.2.5 lacks (it answered 404 to every call):
    ``CreateCloudFrontOriginAccessIdentity``, ``GetCloudFrontOriginAccessIdentity``,
    ``ListCloudFrontOriginAccessIdentities`` and ``DeleteCloudFrontOriginAccessIdentity``, the
    last refusing with 409 ``CloudFrontOriginAccessIdentityInUse`` an identity a distribution's
    origin names and with 404 ``NoSuchCloudFrontOriginAccessIdentity`` one that does not exist."""
    import uuid

    from moto.cloudfront import responses as cf_responses
    from moto.cloudfront import urls as cf_urls
    from moto.cloudfront.exceptions import CloudFrontException
    from moto.core.responses import ActionResult, EmptyResult

    response_cls = _require(cf_responses, "CloudFrontResponse")
    paths = _require(cf_urls, "url_paths")
    if hasattr(response_cls, "create_cloud_front_origin_access_identity"):
        raise PatchError("moto now implements origin access identities; review correction 24 of tools/moto/server.py")
    paths["{0}/2020-05-31/origin-access-identity/cloudfront$"] = response_cls.dispatch
    paths["{0}/2020-05-31/origin-access-identity/cloudfront/(?P<oai_id>[^/]+)$"] = response_cls.dispatch

    def identities(backend: Any) -> dict[str, dict[str, Any]]:
        if not hasattr(backend, "_origin_access_identities"):
            backend._origin_access_identities = {}
        return backend._origin_access_identities

    def missing() -> Exception:
        return CloudFrontException(
            "NoSuchCloudFrontOriginAccessIdentity", "The specified origin access identity does not exist."
        )

    def create(self: Any) -> Any:
        config = self._get_param("CloudFrontOriginAccessIdentityConfig", {})
        oai_id = "E" + uuid.uuid4().hex[:13].upper()
        etag = uuid.uuid4().hex[:14].upper()
        identity = {
            "Id": oai_id,
            "S3CanonicalUserId": uuid.uuid4().hex + uuid.uuid4().hex,
            "CloudFrontOriginAccessIdentityConfig": {
                "CallerReference": config.get("CallerReference", ""),
                "Comment": config.get("Comment", ""),
            },
            "ETag": etag,
        }
        identities(self.backend)[oai_id] = identity
        result = {k: v for k, v in identity.items() if k != "ETag"}
        return ActionResult({
            "CloudFrontOriginAccessIdentity": result,
            "ETag": etag,
            "Location": f"https://cloudfront.amazonaws.com/2020-05-31/origin-access-identity/cloudfront/{oai_id}",
        })

    def get(self: Any) -> Any:
        identity = identities(self.backend).get(self._get_param("Id"))
        if identity is None:
            raise missing()
        result = {k: v for k, v in identity.items() if k != "ETag"}
        return ActionResult({"CloudFrontOriginAccessIdentity": result, "ETag": identity["ETag"]})

    def list_identities(self: Any) -> Any:
        items = [
            {"Id": i["Id"], "S3CanonicalUserId": i["S3CanonicalUserId"],
             "Comment": i["CloudFrontOriginAccessIdentityConfig"]["Comment"]}
            for i in identities(self.backend).values()
        ]
        return ActionResult({"CloudFrontOriginAccessIdentityList": {
            "Marker": "", "MaxItems": 100, "IsTruncated": False, "Quantity": len(items), "Items": items or None,
        }})

    def delete(self: Any) -> Any:
        oai_id = self._get_param("Id")
        if oai_id not in identities(self.backend):
            raise missing()
        path = f"origin-access-identity/cloudfront/{oai_id}"
        for dist in self.backend.distributions.values():
            if any(getattr(o, "s3_access_identity", "") == path for o in dist.distribution_config.Origins["Items"]):
                raise CloudFrontException(
                    "CloudFrontOriginAccessIdentityInUse", "The CloudFront origin access identity is still being used."
                )
        del identities(self.backend)[oai_id]
        return EmptyResult()

    response_cls.create_cloud_front_origin_access_identity = create
    response_cls.get_cloud_front_origin_access_identity = get
    response_cls.list_cloud_front_origin_access_identities = list_identities
    response_cls.delete_cloud_front_origin_access_identity = delete


# --- 25. Account limits --------------------------------------------------------------------------


def patch_account_limits() -> None:
    """Correction 25: CloudFormation and Auto Scaling ``DescribeAccountLimits``, which moto
    5.2.5 answers with 500 NotImplemented. The limits are AWS's defaults
    (``ACCOUNT_LIMIT_DEFAULTS``) unless the emulation setting ``account_limits`` gives the
    calling account others; Auto Scaling also answers the account's current number of groups
    and launch configurations in the region, as AWS does."""
    from moto.autoscaling import responses as asg_responses
    from moto.cloudformation import responses as cfn_responses
    from moto.core.responses import ActionResult

    cfn_cls = _require(cfn_responses, "CloudFormationResponse")
    asg_cls = _require(asg_responses, "AutoScalingResponse")
    for cls in (cfn_cls, asg_cls):
        if "describe_account_limits" in vars(cls):
            raise PatchError(f"moto now implements {cls.__name__}.describe_account_limits; review correction 25")

    def cfn_describe_account_limits(self: Any) -> Any:
        names = ("StackLimit", "StackOutputsLimit", "ConcurrentResourcesLimit")
        limits = [{"Name": n, "Value": EMULATION.account_limit(self.current_account, n)} for n in names]
        return ActionResult({"AccountLimits": limits})

    def asg_describe_account_limits(self: Any) -> Any:
        backend = self.autoscaling_backend
        account = self.current_account
        return ActionResult({
            "MaxNumberOfAutoScalingGroups": EMULATION.account_limit(account, "MaxNumberOfAutoScalingGroups"),
            "MaxNumberOfLaunchConfigurations": EMULATION.account_limit(account, "MaxNumberOfLaunchConfigurations"),
            "NumberOfAutoScalingGroups": len(backend.autoscaling_groups),
            "NumberOfLaunchConfigurations": len(backend.launch_configurations),
        })

    cfn_cls.describe_account_limits = cfn_describe_account_limits
    asg_cls.describe_account_limits = asg_describe_account_limits


# --- 26. A terminated instance lets go of its other interfaces -----------------------------------


def patch_terminate_detaches_interfaces() -> None:
    """Correction 26: moto 5.2.5's ``Instance.terminate`` leaves every network interface attached
    to the terminated instance, so an interface attached as device 1 (a master's etcd interface)
    stays ``in-use`` and ``AttachNetworkInterface`` to its replacement is never possible. EC2
    detaches an instance's other interfaces when it terminates (those with
    ``DeleteOnTermination`` are deleted, as moto already does), and they become ``available``."""
    from moto.ec2.models import instances as instance_models

    instance_cls = _require(instance_models, "Instance")
    original_terminate = _require(instance_cls, "terminate")
    _require(instance_cls, "detach_eni")

    def terminate(self: Any) -> Any:
        for index, nic in list(self.nics.items()):
            if index != 0 and not getattr(nic, "delete_on_termination", False):
                self.detach_eni(nic)
        return original_terminate(self)

    instance_cls.terminate = terminate


# --- 27. Network quotas -------------------------------------------------------------------------


NETWORK_SERVICE_QUOTAS = {("vpc", "L-F678F1CE"), ("vpc", "L-FE5A380F")}
"""The Service Quotas quotas correction 27 answers from the account's limits."""


def patch_network_quotas() -> None:
    """Correction 27: EC2 ``DescribeAccountAttributes`` (``vpc-max-elastic-ips``,
    ``max-elastic-ips``) and Service Quotas ``GetServiceQuota`` (VPCs per Region, NAT gateways
    per Availability Zone) answer the calling account's limits; moto 5.2.5 answered fixed
    defaults. Other attributes and quotas are moto's."""
    from moto.ec2.responses import account_attributes as ec2_attributes
    from moto.servicequotas import responses as sq_responses

    attributes_cls = _require(ec2_attributes, "AccountAttributes")
    original_attributes = _require(attributes_cls, "describe_account_attributes")
    sq_cls = _require(sq_responses, "ServiceQuotasResponse")
    original_quota = _require(sq_cls, "get_service_quota")

    def describe_account_attributes(self: Any) -> Any:
        result = original_attributes(self)
        limit = str(EMULATION.account_limit(self.current_account, "vpc-max-elastic-ips"))
        attributes = _require(result, "result")["AccountAttributes"]
        for attribute in attributes:
            if attribute["AttributeName"] in ("vpc-max-elastic-ips", "max-elastic-ips"):
                attribute["AttributeValues"] = [{"AttributeValue": limit}]
        wanted = self._get_param("AttributeNames", [])
        if wanted:
            attributes[:] = [a for a in attributes if a["AttributeName"] in wanted]
        return result

    def get_service_quota(self: Any) -> str:
        answer = original_quota(self)
        params = json.loads(self.body)
        key = (str(params.get("ServiceCode")), str(params.get("QuotaCode")))
        if key not in NETWORK_SERVICE_QUOTAS:
            return answer
        body = json.loads(answer)
        body["Quota"]["Value"] = float(EMULATION.account_limit(self.current_account, key[1]))
        return json.dumps(body)

    attributes_cls.describe_account_attributes = describe_account_attributes
    sq_cls.get_service_quota = get_service_quota


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
    patch_serial_requests()
    patch_lifecycle_hooks()
    patch_group_update_in_place()
    patch_rolling_updates()
    patch_group_deletion_hooks()
    patch_security_group_in_use()
    patch_hosted_zone_deletion()
    patch_load_balancer_cloudformation()
    patch_drift_detection()
    patch_execute_change_set()
    patch_bucket_owner_enforced()
    patch_kms_key_policy_reads()
    patch_web_identity()
    patch_cloudfront()
    patch_account_limits()
    patch_terminate_detaches_interfaces()
    patch_network_quotas()


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
    method), ``method`` and ``account``: for a key issued by ``sts:AssumeRole``, the account of
    the role it was issued for (so a test can tell which tenant account, and with one account
    per cluster which cluster, a call was for), else ``""``; ``instance``, the ``InstanceId``
    parameter of a Query-protocol request (``""`` without one), so that a test can count what
    was done to one instance; and ``status``, the HTTP status of the answer (``0`` until it is
    answered). ``GET /moto-api/request-log``
    returns the entries; the request log's own requests and moto's ``/moto-api/`` are not
    logged."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.entries: list[dict[str, Any]] = []
        self.issued_by: dict[str, str] = {}
        self.account_of: dict[str, str] = {}

    @staticmethod
    def emulation(environ: dict[str, Any], start_response: Any) -> Any:
        """``GET`` answers the emulation settings, ``POST`` sets them (see ``Emulation``)."""
        status = "200 OK"
        answer: dict[str, Any] = {}
        if environ.get("REQUEST_METHOD") == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            text = environ["wsgi.input"].read(length).decode("utf-8", "replace") if length else "{}"
            try:
                settings = json.loads(text)
                if not isinstance(settings, dict):
                    raise ValueError("the body must be a JSON object such as {\"time_scale\": 0.01}")
                EMULATION.update(settings)
            except ValueError as err:  # json.JSONDecodeError is a ValueError
                status, answer = "400 Bad Request", {"error": str(err)}
        body = json.dumps(answer or EMULATION.as_dict()).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

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
        if path == EMULATION_PATH:
            return self.emulation(environ, start_response)
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
        role_arn = ""
        instance = ""
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
            body = parse_qs(raw.decode("utf-8", "replace"))
            action = body.get("Action", [""])[0]
            role_arn = body.get("RoleArn", [""])[0]
            instance = body.get("InstanceId", [""])[0]
        if not action:
            action = method
        entry = {
            "time": arrived,
            "key": key,
            "principal": "",
            "service": service,
            "action": action,
            "method": method,
            "account": "",
            "instance": instance,
            "status": 0,
        }
        throttled = bool(service) and EMULATION.throttle_share > 0 and random.random() < EMULATION.throttle_share
        if throttled:
            entry["throttled"] = True
        with self.lock:
            entry["principal"] = self.principal(key)
            entry["account"] = self.account_of.get(key, "")
            self.entries.append(entry)
            if len(self.entries) > REQUEST_LOG_LIMIT:
                del self.entries[: len(self.entries) - REQUEST_LOG_LIMIT]
        answer = start_response

        def start_response(status: str, headers: Any, *rest: Any) -> Any:
            with self.lock:
                entry["status"] = int(status.split(" ", 1)[0])
            return answer(status, headers, *rest)

        if throttled:
            return throttling_error(service, bool(target), start_response)
        if action != "AssumeRole":
            return self.app(environ, start_response)
        # Remember which key assumed the role, to trace the issued key back to it.
        chunks = list(self.app(environ, start_response))
        issued = re.search(rb"<AccessKeyId>([^<]+)</AccessKeyId>", b"".join(chunks))
        if issued and key:
            with self.lock:
                self.issued_by[issued.group(1).decode()] = key
                # arn:aws:iam::<account>:role/<name>
                parts = role_arn.split(":")
                if len(parts) > 4 and parts[4]:
                    self.account_of[issued.group(1).decode()] = parts[4]
        return chunks


# --- 22. Throttling ------------------------------------------------------------------------------


def throttling_error(service: str, json_protocol: bool, start_response: Any) -> list[bytes]:
    """The answer of ``service`` to a request over its rate (correction 22): EC2's
    ``RequestLimitExceeded`` and S3's ``SlowDown`` (both 503), ``ThrottlingException`` in the
    JSON protocol (KMS), and ``Throttling`` (400) in the query and REST-XML protocols of the
    other services. Each is a code the AWS SDKs retry as throttling."""
    import uuid

    request_id = str(uuid.uuid4())
    if service == "ec2":
        status, kind = "503 Service Unavailable", "text/xml"
        body = (
            "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded."
            f"</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>"
        )
    elif service == "s3":
        status, kind = "503 Slow Down", "application/xml"
        body = (
            "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
            f"<RequestId>{request_id}</RequestId></Error>"
        )
    elif json_protocol:
        status, kind = "400 Bad Request", "application/x-amz-json-1.1"
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"})
    else:
        status, kind = "400 Bad Request", "text/xml"
        body = (
            "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message>"
            f"</Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        )
    data = body.encode()
    start_response(
        status,
        [("Content-Type", kind), ("Content-Length", str(len(data))), ("x-amzn-RequestId", request_id)],
    )
    return [data]


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
    parser.add_argument(
        "--time-scale",
        default=os.environ.get(TIME_SCALE_ENV, "1.0"),
        help=f"factor on lifecycle-hook timeouts and rolling-update pauses (default ${TIME_SCALE_ENV} or 1.0)",
    )
    parser.add_argument(
        "--group-deletion-hooks",
        default=os.environ.get(GROUP_DELETION_HOOKS_ENV, "false"),
        help=f"true: a stack delete drains its groups through their hooks (default ${GROUP_DELETION_HOOKS_ENV} or false)",
    )
    args = parser.parse_args(argv)
    try:
        EMULATION.update({"time_scale": args.time_scale, "group_deletion_hooks": args.group_deletion_hooks})
    except ValueError as err:
        parser.error(str(err))

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
