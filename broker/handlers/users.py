"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), as Kafka 2.8's
brokers serve them from ZooKeeper.

How it works: any broker answers. Alter checks the request (broker/core/scram_users.py:
names, mechanisms, iterations, salts, duplicates), reads the configs of the users that
passed from /config/users, applies each user's deletions and upsertions (a credential
derived from the salt and salted password the client sent; the password never
travels) and writes each user's config with a /config/changes notification, which
every broker's watcher turns into its credential cache (server_common/security/
user_credentials.py). A user's result is NONE or the first problem found; a failed user has
none of its changes written. Describe reads the named users (or, for none, every user
under /config/users) and answers mechanisms and iterations only. A ZooKeeper failure is
answered UNKNOWN_SERVER_ERROR for the users concerned (the whole request for describe).
"""

from __future__ import annotations

import logging

from broker.core import scram_users
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from server_common.zk import ZkError

log = logging.getLogger(__name__)


class UserHandlers:
    def __init__(self, gateway: BrokerZkGateway) -> None:
        self.gateway = gateway

    async def describe_user_scram_credentials(
        self, request: m.DescribeUserScramCredentialsRequest
    ) -> m.DescribeUserScramCredentialsResponse:
        names = [user.name for user in request.users or []]
        try:
            if not names:
                configs = await self.gateway.all_user_configs()
                results = [
                    result
                    for user in sorted(configs)
                    if (result := scram_users.describe_user(user, configs[user], explicit=False))
                ]
            else:
                answered = scram_users.check_describe(names)
                to_read = [user for user in dict.fromkeys(names) if user not in answered]
                configs = await self.gateway.user_configs(to_read) if to_read else {}
                for user in to_read:
                    result = scram_users.describe_user(user, configs[user], explicit=True)
                    if result is not None:  # always, for a user asked for by name
                        answered[user] = result
                results = [answered[user] for user in dict.fromkeys(names)]
        except ZkError as exc:
            log.warning("DescribeUserScramCredentials: cannot read /config/users: %s", exc)
            return m.DescribeUserScramCredentialsResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR),
                error_message=f"cannot read user configs: {exc}",
                results=[],
            )
        return m.DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=0, error_message=None, results=results
        )

    async def alter_user_scram_credentials(
        self, request: m.AlterUserScramCredentialsRequest
    ) -> m.AlterUserScramCredentialsResponse:
        order, failures, changes = scram_users.check_alterations(request)
        if changes:
            try:
                configs = await self.gateway.user_configs(sorted(changes))
            except ZkError as exc:
                configs = {}
                for user in changes:
                    failures[user] = _zk_failure(exc)
        for user, user_changes in changes.items():
            if user in failures:
                continue
            new = scram_users.apply_alterations(configs[user], user_changes)
            if isinstance(new, scram_users.UserFailure):
                failures[user] = new
                continue
            try:
                await self.gateway.set_user_config(user, new)
            except ZkError as exc:
                failures[user] = _zk_failure(exc)
                continue
            log.info(
                "user %s: SCRAM credentials altered (deleted %s, set %s)",
                user,
                user_changes.deletions,
                [m.SCRAM_MECHANISM_NAMES[u.mechanism] for u in user_changes.upsertions],
            )
        results = []
        for user in order:
            failure = failures.get(user)
            results.append(
                m.AlterUserScramCredentialsResult(
                    user=user,
                    error_code=int(failure.code) if failure else 0,
                    error_message=failure.message if failure else None,
                )
            )
        return m.AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


def _zk_failure(exc: ZkError) -> scram_users.UserFailure:
    log.warning("AlterUserScramCredentials: ZooKeeper failed: %s", exc)
    return scram_users.UserFailure(ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper failed: {exc}")
