"""What the authorization rules share: the request's `Check` and the ways to answer.

How it works: `Check` holds the request's principal and host (read once, when the
request arrives) and asks the `AclAuthorizer`; `then` applies a change to a handler's
answer (now, or when its `Reply` is set); `by_topic` serves only the items of a request
whose topic may be acted on and answers the others with their own error entries;
`cluster` is the rule of an API that needs one operation on the cluster. `Denials`
counts and logs (rate-limited) what was refused, and `DenialEvents` writes it to the
broker's events.jsonl (rate-limited per principal, resource and operation).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from broker.core.metadata_cache import MetadataCache
from client.protocol.errors import ErrorCode
from server_common.network import NO_RESPONSE, Reply, client_host, error_answer, is_error_answer
from server_common.security.acls import CLUSTER_NAME, AclAuthorizer, AclOperation, ResourceType
from server_common.security.principal import current_principal

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
# DescribeConfigs/AlterConfigs resource types (Kafka's ConfigResource.Type).
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER = 2, 4, 8

log = logging.getLogger(__name__)

Call = Callable[[Any], Awaitable[Any]]


class Check:
    """May this request's principal, from this host, do `op` on a resource?"""

    __slots__ = (
        "authorizer",
        "principal",
        "host",
        "superuser",
        "cache",
        "auto_create_topics",
        "denials",
    )

    def __init__(
        self,
        authorizer: AclAuthorizer,
        cache: MetadataCache,
        superuser: bool,
        *,
        auto_create_topics: bool = False,
        denials: Denials | None = None,
    ):
        self.authorizer = authorizer
        self.principal = str(current_principal())
        self.host = client_host()
        self.superuser = superuser
        self.cache = cache  # names topics asked for by id
        self.auto_create_topics = auto_create_topics  # auto.create.topics.enable
        self.denials = denials

    def __call__(self, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        if self.quietly(op, rtype, name):
            return True
        if self.denials is not None:
            self.denials.note(self.principal, self.host, op, rtype, name)
        return False

    def quietly(self, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        """The same answer, not counted as a denial (Kafka's logIfDenied=false: a check
        with a fallback, or a filter of what to show)."""
        return self.superuser or self.authorizer.authorize(
            self.principal, self.host, op, rtype, name
        )

    def cluster(self, op: AclOperation) -> bool:
        return self(op, CLUSTER, CLUSTER_NAME)

    def topic(self, op: AclOperation, name: str) -> bool:
        return self(op, TOPIC, name)


class Denials:
    """Counts refusals and logs them, at most one line a second (with how many since),
    in the words of Kafka's authorizer log: "Principal = User:bob is Denied Operation =
    Write from host = 10.0.0.1 on resource = Topic:LITERAL:orders"; and, given `event`,
    writes `authorization_denied` events through `DenialEvents`."""

    INTERVAL_S = 1.0

    def __init__(
        self, clock: Callable[[], float], event: Callable[[dict], None] | None = None
    ) -> None:
        self.count = 0
        self._clock = clock
        self._last = -math.inf
        self._since = 0
        self.events = DenialEvents(event) if event is not None else None

    def note(
        self, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str
    ) -> None:
        self.count += 1
        self._since += 1
        now = self._clock()
        if self.events is not None:
            self.events.note(now, principal, host, op, rtype, name)
        if now - self._last >= self.INTERVAL_S:
            log.info(
                "Principal = %s is Denied Operation = %s from host = %s on resource = "
                "%s:LITERAL:%s (%d denial(s) since the last such line)",
                principal,
                op.title,
                host,
                rtype.title,
                name[:200],
                self._since,
            )
            self._last, self._since = now, 0


class DenialEvents:
    """Rate-limited `authorization_denied` events: at most one a second per (principal,
    resource, operation), carrying in `suppressed` how many of that key were not written
    since its last event, and at most `MAX_PER_S` a second in all; what no key can carry
    (a flood of distinct keys) is reported as `other_suppressed` by the next event. The
    keys remembered are bounded by `MAX_KEYS`, so neither memory nor the file grows with
    the flood."""

    INTERVAL_S = 1.0
    MAX_PER_S = 100
    MAX_KEYS = 1024
    NAME_CHARS = 200

    def __init__(self, emit: Callable[[dict], None]) -> None:
        self._emit = emit
        self._keys: dict[tuple[str, str, str, str], list[float]] = {}  # [last, suppressed]
        self._other = 0  # denials suppressed that no remembered key carries
        self._window = -math.inf  # start of the current one-second budget
        self._written = 0  # events written in that window

    def note(
        self,
        now: float,
        principal: str,
        host: str,
        op: AclOperation,
        rtype: ResourceType,
        name: str,
    ) -> None:
        name = name[: self.NAME_CHARS]
        key = (principal[: self.NAME_CHARS], rtype.title, name, op.title)
        entry = self._keys.get(key)
        if entry is not None and now - entry[0] < self.INTERVAL_S:
            entry[1] += 1
            return
        if now - self._window >= 1.0:
            self._window, self._written = now, 0
        if self._written >= self.MAX_PER_S or (entry is None and not self._room(now)):
            if entry is not None:
                entry[1] += 1
            else:
                self._other += 1
            return
        suppressed = int(entry[1]) if entry is not None else 0
        self._keys[key] = [now, 0]
        self._written += 1
        data: dict = {
            "principal": key[0],
            "address": host,
            "resource_type": rtype.title,
            "resource_name": name,
            "operation": op.title,
            "suppressed": suppressed,
        }
        if self._other:
            data["other_suppressed"], self._other = self._other, 0
        self._emit(data)

    def _room(self, now: float) -> bool:
        """Whether a new key fits, after forgetting the keys quiet for a second (their
        suppressed counts move to `other_suppressed`)."""
        if len(self._keys) < self.MAX_KEYS:
            return True
        for key, (last, suppressed) in list(self._keys.items()):
            if now - last >= self.INTERVAL_S:
                self._other += int(suppressed)
                del self._keys[key]
        return len(self._keys) < self.MAX_KEYS


# -- helpers ---------------------------------------------------------------------------
def then(outcome: Any, add: Callable[[Any], Any]) -> Any:
    """`add` applied to the handler's answer, now or when its Reply is set."""
    if outcome is NO_RESPONSE or is_error_answer(outcome):
        return outcome
    if isinstance(outcome, Reply):
        return outcome.then(lambda value: value if is_error_answer(value) else add(value))
    return add(outcome)


def replace(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, **changes)


async def cluster_rule(op: AclOperation, check: Check, request: Any, call: Call) -> Any:
    if not check.cluster(op):
        return error_answer(CLUSTER_DENIED, f"{check.principal} may not {op.title} the cluster")
    return await call(request)


def cluster(op: AclOperation):
    async def rule(check: Check, request: Any, call: Call) -> Any:
        return await cluster_rule(op, check, request, call)

    return rule


async def by_topic(
    check: Check,
    request: Any,
    call: Call,
    *,
    op: AclOperation,
    items: str,
    name: Callable[[Any], str | None],
    answer: Callable[[Any], Any],
    field: str,
    empty: Callable[[list], Any],
) -> Any:
    """Serve the request's `items` whose topic `name` the principal may `op`; the others
    are answered by `answer(item)` in the response's `field` list."""
    allowed: list[Any] = []
    denied: list[Any] = []
    for item in getattr(request, items):
        topic = name(item)  # None: no such topic, the handler answers it
        (allowed if topic is None or check.topic(op, topic) else denied).append(item)
    if not denied:
        return await call(request)
    refused = [answer(item) for item in denied]
    if not allowed:
        return empty(refused)
    outcome = await call(replace(request, **{items: allowed}))
    return then(outcome, lambda r: replace(r, **{field: [*getattr(r, field), *refused]}))
