#!/usr/bin/env python3
"""moto, the AWS emulator, on loopback for the test suites, with three behaviours corrected.

Usage::

    python tools/moto/server.py --host 127.0.0.1 --port 0 --port-file PATH

Binds ``--host`` on ``--port`` (0 picks a free port), writes the bound port to ``--port-file``
(atomically, once the socket accepts connections) and serves until its parent goes away: the
process exits when its stdin reaches end-of-file (the parent holds the write end of a pipe, so
this happens however the parent dies) or when its parent process id changes (the parent died and
the process was re-parented). Tests therefore never leak servers.

moto 5.2.5 differs from AWS in ways that would make an operator test either fail for the wrong
reason or pass without exercising the real code path. Three of them are corrected here, each by a
small monkeypatch that names the moto behaviour it replaces:

1. CloudFormation termination protection: ``UpdateTerminationProtection`` is implemented and
   ``DeleteStack`` refuses a protected stack with AWS's ``ValidationError``.
2. ``AWS::EC2::VPCPeeringConnection`` honours ``PeerOwnerId``/``PeerRegion``, so a stack in a
   tenant account can peer with a VPC of the management account.
3. S3 bucket policies: statements carrying a ``Condition`` are not applied. moto does not evaluate
   conditions faithfully (a ``Deny`` on ``aws:SecureTransport = false`` denies *every* request), so
   the emulator does not evaluate conditional statements at all. Unconditional statements still
   apply.

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


def apply_patches() -> None:
    """Apply every correction; raises ``PatchError`` if moto's internals moved."""
    patch_termination_protection()
    patch_vpc_peering_cloudformation()
    patch_bucket_policy_conditions()


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
    app = DomainDispatcherApplication(create_backend_app)
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
    parent = os.getppid()
    while not stop.wait(0.5):
        if os.getppid() != parent:
            break
    # The server thread is a daemon; exiting the process ends it without a slow shutdown.
    return 0


if __name__ == "__main__":
    sys.exit(main())
