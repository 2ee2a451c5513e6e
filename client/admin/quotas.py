"""The admin client's client quota requests (KIP-546): describe and alter the quotas of
users, client-ids and (user, client-id) pairs.

How it works: both go to any broker (`_request_any`; the broker reads and writes
/config/users and /config/clients in ZooKeeper). An entity is a dict of entity type
(`"user"`, `"client-id"`) to name, None for that type's default (`<default>`).
`describe_client_quotas(filter)` takes (entity type, name) pairs, a name of None
matching the default and `ANY` any name, and returns each matching entity (as sorted
(type, name) pairs) with its quota values; `alter_client_quotas` sets and removes one
entity's quotas and returns None or the broker's `TributaryError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from client.admin.base import AdminBase, error_or_none
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError

ANY = object()  # a describe filter's "any name of this entity type"
QuotaEntityKey = tuple[tuple[str, str | None], ...]


def _components(entity: Mapping[str, str | None]) -> list[m.ClientQuotaEntityComponent]:
    return [
        m.ClientQuotaEntityComponent(entity_type=entity_type, entity_name=name)
        for entity_type, name in entity.items()
    ]


class QuotaAdmin(AdminBase):
    """Client quotas (a mixin of `client.admin.Admin`)."""

    async def describe_client_quotas(
        self, filter: Iterable[tuple[str, object]] = (), strict: bool = False
    ) -> dict[QuotaEntityKey, dict[str, float]]:
        """The entities matching every (entity type, name) of `filter` (name None: the
        default, `ANY`: any) and their quotas. Raises the broker's error."""
        components = []
        for entity_type, name in filter:
            if name is ANY:
                components.append(
                    m.DescribeClientQuotasComponent(entity_type=entity_type, match_type=m.MATCH_ANY)
                )
            elif name is None:
                components.append(
                    m.DescribeClientQuotasComponent(
                        entity_type=entity_type, match_type=m.MATCH_DEFAULT
                    )
                )
            else:
                components.append(
                    m.DescribeClientQuotasComponent(
                        entity_type=entity_type, match_type=m.MATCH_EXACT, match=str(name)
                    )
                )
        request = m.DescribeClientQuotasRequest(components=components, strict=strict)
        response = await self._request_any(request)
        if response.error_code != ErrorCode.NONE:
            raise TributaryError(response.error_code, response.error_message)
        return {
            tuple(sorted((c.entity_type, c.entity_name) for c in entry.entity)): {
                value.key: value.value for value in entry.values
            }
            for entry in response.entries or []
        }

    async def alter_client_quotas(
        self,
        entity: Mapping[str, str | None],
        set_quotas: Mapping[str, float] | None = None,
        remove: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> TributaryError | None:
        """Set and remove quotas of one entity; None or the broker's error."""
        ops = [m.ClientQuotaOp(key=k, value=float(v)) for k, v in (set_quotas or {}).items()]
        ops += [m.ClientQuotaOp(key=k, remove=True) for k in remove]
        request = m.AlterClientQuotasRequest(
            entries=[m.AlterClientQuotasEntry(entity=_components(entity), ops=ops)],
            validate_only=validate_only,
        )
        response = await self._request_any(request)
        for result in response.entries:
            error = error_or_none(result.error_code, result.error_message)
            if error is not None:
                return error
        return None
