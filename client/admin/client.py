"""`Admin`, the admin client: every family of admin requests in one object, and
`open_admin`, which builds a connected one.

How it works: `Admin` is the family mixins of this package over their shared base
(`base.AdminBase`: the cluster's metadata, the connection pool, routing to any broker);
it adds no state or method of its own, so each request's code lives with its family.
`async with open_admin("host:port") as admin:` opens a connection pool, bootstraps the
metadata (raising `NoBrokersAvailableError` when nobody answers) and closes the pool on
exit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from client.admin.acls import AclAdmin
from client.admin.brokers import BrokerAdmin
from client.admin.configs import ConfigAdmin
from client.admin.groups import GroupAdmin
from client.admin.offsets import OffsetAdmin
from client.admin.quotas import QuotaAdmin
from client.admin.replicas import ReplicaAdmin
from client.admin.topics import TopicAdmin
from client.admin.transactions import TransactionAdmin
from client.admin.users import UserAdmin
from client.connection import Connector, open_connection_pool
from client.security.secure_connector import with_security


class Admin(
    TopicAdmin,
    ConfigAdmin,
    BrokerAdmin,
    ReplicaAdmin,
    OffsetAdmin,
    GroupAdmin,
    AclAdmin,
    UserAdmin,
    TransactionAdmin,
    QuotaAdmin,
):
    """Build with `open_admin()`; see the `client.admin` package docstring."""


@asynccontextmanager
async def open_admin(
    bootstrap: str | Iterable[str],
    *,
    client_id: str | None = "tributary-admin",
    connector: Connector | None = None,
    **config: Any,
) -> AsyncIterator[Admin]:
    """A connected admin client. Raises `NoBrokersAvailableError` when nobody answers."""
    connector = with_security(connector, config)  # security_protocol, ssl_*, sasl_*
    async with open_connection_pool(client_id=client_id, connector=connector) as pool:
        admin = Admin(pool, bootstrap, **config)
        await admin.start()
        yield admin
