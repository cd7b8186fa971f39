"""The first users of a cluster: ``sasl.scram.bootstrap.users.file``.

A fresh cluster whose listeners all need SASL has no user to log in with, so no admin
client can create one. Kafka solves this at format time (``kafka-storage format
--add-scram``); Sluice reads a file with the same syntax when a broker starts, one
credential per line:

    SCRAM-SHA-512=[name=alice,password=alice-secret]
    SCRAM-SHA-256=[name=bob,password="with,comma",iterations=8192]

Credentials a user already has (for that mechanism) are left alone, so a password changed
later through AlterUserScramCredentials is not reset by the next restart. The new ones go
to the active controller like any AlterUserScramCredentials (salted here; the password
never leaves this process, and is never logged). The file must not be readable by other
users (mode 0600 or stricter), and the password never appears on a command line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from kio.schema.alter_user_scram_credentials.v0 import request as alter_req
from kio.static.primitive import i8, i32

from dataplane.cluster.changes import Changes
from dataplane.cluster.member import ClusterMember, ControllerIsLocal
from dataplane.cluster.records import ScramCredential
from dataplane.security import credentials
from wire.errors import BrokerError, InvalidConfig

log = logging.getLogger(__name__)
KEY = "sasl.scram.bootstrap.users.file"
LINE = re.compile(r"^(?P<mech>[A-Z0-9-]+)=\[(?P<body>.*)\]$")
FIELD = re.compile(r'\s*(?P<key>[a-z]+)=(?:"(?P<quoted>[^"]*)"|(?P<plain>[^,]*))\s*(?:,|$)')
TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Initial:
    """One user of the file, salted (the password itself is not kept)."""

    name: str
    mechanism: int
    salt: bytes
    salted: bytes
    iterations: int

    def record(self) -> ScramCredential:
        return credentials.from_salted(
            self.name, self.mechanism, self.salt, self.salted, self.iterations
        )

    def upsertion(self) -> alter_req.ScramCredentialUpsertion:
        return alter_req.ScramCredentialUpsertion(
            name=self.name,
            mechanism=i8(self.mechanism),
            iterations=i32(self.iterations),
            salt=self.salt,
            salted_password=self.salted,
        )


def read_users(path: str) -> list[Initial]:
    """The credentials of the file, salted (fresh random salts); InvalidConfig names the
    key and line of a bad entry, never its password."""
    file = Path(path)
    try:
        mode = file.stat().st_mode
        text = file.read_text()
    except OSError as exc:
        raise InvalidConfig(f"{KEY}: cannot read {path}: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidConfig(f"{KEY}: {path} is readable by other users: chmod 600 it")
    out: list[Initial] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        out.append(_parse(line, f"{KEY}: line {number}"))
    return out


def _parse(line: str, where: str) -> Initial:
    match = LINE.match(line)
    if match is None:
        raise InvalidConfig(f"{where}: expected MECHANISM=[name=...,password=...]")
    mechanism = credentials.MECHANISMS.get(match["mech"])
    if mechanism is None:
        raise InvalidConfig(f"{where}: mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512")
    fields: dict[str, str] = {}
    body = match["body"]
    pos = 0
    while pos < len(body):
        found = FIELD.match(body, pos)
        if found is None or found.end() == pos:
            raise InvalidConfig(f"{where}: expected key=value pairs separated by commas")
        value = found["quoted"] if found["quoted"] is not None else found["plain"]
        fields[found["key"]] = value.strip()
        pos = found.end()
    name, password = fields.get("name", ""), fields.get("password", "")
    if not name or not password:
        raise InvalidConfig(f"{where}: name and password are required")
    iterations = fields.get("iterations", str(credentials.MIN_ITERATIONS))
    if not iterations.isdigit() or not (
        credentials.MIN_ITERATIONS <= int(iterations) <= credentials.MAX_ITERATIONS
    ):
        raise InvalidConfig(f"{where}: iterations must be 4096-16384")
    salt = os.urandom(credentials.SALT_BYTES)
    salted = credentials.salted_password(password, salt, int(iterations), mechanism)
    return Initial(name, mechanism, salt, salted, int(iterations))


async def bootstrap_users(member: ClusterMember, users: list[Initial]) -> None:
    """Record the credentials of ``users`` that the cluster does not have yet, through the
    active controller; retried until it answers (up to TIMEOUT_S)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        missing = [c for c in users if c.mechanism not in member.image.scram.get(c.name, {})]
        if not missing:
            return
        try:
            await _record(member, missing)
        except (BrokerError, ControllerIsLocal, OSError, TimeoutError) as exc:
            if time.monotonic() >= deadline:
                log.error("%s: the controller did not record the users: %s", KEY, exc)
                return
            await asyncio.sleep(0.2)
            continue
        names = sorted({c.name for c in missing})
        log.info("%s: created SCRAM credentials of %s", KEY, ", ".join(names))


async def _record(member: ClusterMember, missing: list[Initial]) -> None:
    controller = member.local_controller()
    if controller is not None:

        def decide(changes: Changes) -> None:
            for c in missing:
                if c.mechanism not in changes.image.scram.get(c.name, {}):
                    changes.set_scram_credential(c.record())

        await controller.decide(decide)
        return
    # Another broker is the controller: send the salted credentials, as an admin client
    # would (the controller keeps only the salt, iterations and keys).
    request = alter_req.AlterUserScramCredentialsRequest(
        deletions=(), upsertions=tuple(c.upsertion() for c in missing)
    )
    await member.send_to_controller(request, timeout=10.0)
    deadline = time.monotonic() + 5.0
    while any(c.mechanism not in member.image.scram.get(c.name, {}) for c in missing):
        if time.monotonic() >= deadline:
            raise TimeoutError("the users are not in this broker's metadata yet")
        await asyncio.sleep(0.02)
