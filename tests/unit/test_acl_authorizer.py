"""The authorizer's decision (server_common/security/acls.py) against a reference written
straight from Kafka 2.8 AclAuthorizer's rules, and the filters of DescribeAcls/DeleteAcls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from server_common.security.acls import (
    CLUSTER_NAME,
    CONCRETE_OPERATIONS,
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    parse_super_users,
    validate_binding,
)

A, D = PermissionType.ALLOW, PermissionType.DENY
TOPIC = ResourceType.TOPIC


def entry(principal="User:bob", op=AclOperation.READ, perm=A, host="*"):
    return AccessControlEntry(principal, host, op, perm)


def authorizer(*bindings: tuple[ResourcePattern, AccessControlEntry], **kwargs) -> AclAuthorizer:
    auth = AclAuthorizer(**kwargs)
    by_pattern: dict[ResourcePattern, set] = {}
    for pattern, ace in bindings:
        by_pattern.setdefault(pattern, set()).add(ace)
    for pattern, entries in by_pattern.items():
        auth.set_acls(pattern, entries)
    return auth


def test_read_allows_read_and_describe_but_not_write():
    auth = authorizer((ResourcePattern(TOPIC, "t"), entry()))
    assert auth.authorize("User:bob", "10.0.0.1", AclOperation.READ, TOPIC, "t")
    assert auth.authorize("User:bob", "10.0.0.1", AclOperation.DESCRIBE, TOPIC, "t")
    assert not auth.authorize("User:bob", "10.0.0.1", AclOperation.WRITE, TOPIC, "t")
    assert not auth.authorize("User:alice", "10.0.0.1", AclOperation.READ, TOPIC, "t")
    assert not auth.authorize("User:bob", "10.0.0.1", AclOperation.READ, TOPIC, "other")


def test_deny_wins_and_a_deny_of_read_does_not_deny_describe():
    auth = authorizer(
        (ResourcePattern(TOPIC, "*"), entry("User:*", AclOperation.ALL)),
        (ResourcePattern(TOPIC, "sec", PatternType.PREFIXED), entry(op=AclOperation.READ, perm=D)),
    )
    assert not auth.authorize("User:bob", "h", AclOperation.READ, TOPIC, "secret")
    assert auth.authorize("User:bob", "h", AclOperation.DESCRIBE, TOPIC, "secret")
    assert auth.authorize("User:alice", "h", AclOperation.READ, TOPIC, "secret")
    assert auth.authorize("User:bob", "h", AclOperation.READ, TOPIC, "public")


def test_hosts_super_users_and_allow_if_no_acl():
    auth = authorizer(
        (ResourcePattern(TOPIC, "t"), entry(host="10.0.0.1")),
        super_users=parse_super_users("User:admin; User:broker"),
    )
    assert auth.authorize("User:bob", "10.0.0.1", AclOperation.READ, TOPIC, "t")
    assert not auth.authorize("User:bob", "10.0.0.2", AclOperation.READ, TOPIC, "t")
    assert auth.authorize(
        "User:broker", "x", AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
    )
    assert not auth.authorize("User:bob", "x", AclOperation.READ, TOPIC, "no-acl")
    open_auth = authorizer(
        (ResourcePattern(TOPIC, "t"), entry()), allow_everyone_if_no_acl_found=True
    )
    assert open_auth.authorize("User:anyone", "x", AclOperation.WRITE, TOPIC, "no-acl")
    assert not open_auth.authorize("User:anyone", "x", AclOperation.WRITE, TOPIC, "t")


def test_alter_configs_implies_describe_configs():
    auth = authorizer((ResourcePattern(TOPIC, "t"), entry(op=AclOperation.ALTER_CONFIGS)))
    assert auth.authorize("User:bob", "h", AclOperation.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not auth.authorize("User:bob", "h", AclOperation.DESCRIBE, TOPIC, "t")


def test_validation_refuses_what_kafka_refuses():
    ok = AclBinding(ResourcePattern(TOPIC, "t"), entry())
    assert validate_binding(ok) is None
    bad = [
        AclBinding(ResourcePattern(ResourceType.ANY, "t"), entry()),
        AclBinding(ResourcePattern(TOPIC, "t", PatternType.MATCH), entry()),
        AclBinding(ResourcePattern(ResourceType.CLUSTER, "c"), entry()),
        AclBinding(ResourcePattern(TOPIC, "t"), entry(op=AclOperation.ANY)),
        AclBinding(ResourcePattern(TOPIC, "t"), entry(perm=PermissionType.ANY)),
        AclBinding(ResourcePattern(TOPIC, "t"), entry(principal="bob")),
    ]
    assert all(validate_binding(b) for b in bad)


def test_names_parse_in_every_spelling():
    assert ResourceType.parse("TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert ResourceType.TRANSACTIONAL_ID.title == "TransactionalId"
    assert AclOperation.parse("cluster_action") is AclOperation.CLUSTER_ACTION
    assert AclOperation.IDEMPOTENT_WRITE.title == "IdempotentWrite"
    assert PatternType.parse("prefixed") is PatternType.PREFIXED


# -- the reference -------------------------------------------------------------------------
def reference(bindings, super_users, allow_if_none, principal, host, op, rtype, name) -> bool:
    """AclAuthorizer.authorizeAction, read line by line."""
    if principal in super_users:
        return True

    def applies(p: ResourcePattern) -> bool:
        if p.resource_type != rtype:
            return False
        if p.pattern_type == PatternType.LITERAL:
            return p.name == name or p.name == "*"
        return name.startswith(p.name)

    acls = [e for p, e in bindings if applies(p)]
    if not acls:
        return allow_if_none

    def exists(ops, perm):
        return any(
            e.permission == perm
            and e.principal in (principal, "User:*")
            and (e.operation in ops or e.operation == AclOperation.ALL)
            and e.host in (host, "*")
            for e in acls
        )

    if exists({op}, D):
        return False
    if op == AclOperation.DESCRIBE:
        allowing = {
            op,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    elif op == AclOperation.DESCRIBE_CONFIGS:
        allowing = {op, AclOperation.ALTER_CONFIGS}
    else:
        allowing = {op}
    return exists(allowing, A)


names = st.sampled_from(["a", "ab", "abc", "b", "*", "abd"])
principals = st.sampled_from(["User:bob", "User:alice", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
ops = st.sampled_from(CONCRETE_OPERATIONS)
rtypes = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP])
patterns = st.builds(
    ResourcePattern, rtypes, names, st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED])
)
entries = st.builds(AccessControlEntry, principals, hosts, ops, st.sampled_from([A, D]))


@settings(max_examples=400, deadline=None)
@given(
    bindings=st.lists(st.tuples(patterns, entries), max_size=8),
    supers=st.frozensets(st.sampled_from(["User:bob", "User:carol"]), max_size=1),
    allow_if_none=st.booleans(),
    principal=st.sampled_from(["User:bob", "User:alice", "User:carol"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=ops.filter(lambda o: o != AclOperation.ALL),
    rtype=rtypes,
    name=st.sampled_from(["a", "ab", "abc", "abd", "b", "c"]),
)
def test_the_decision_equals_the_reference(
    bindings, supers, allow_if_none, principal, host, op, rtype, name
):
    auth = authorizer(*bindings, super_users=supers, allow_everyone_if_no_acl_found=allow_if_none)
    expected = reference(bindings, supers, allow_if_none, principal, host, op, rtype, name)
    assert auth.authorize(principal, host, op, rtype, name) == expected


def reference_filter(f: AclBindingFilter, b: AclBinding) -> bool:
    p, e = b.pattern, b.entry
    if f.resource_type not in (ResourceType.ANY, p.resource_type):
        return False
    if f.name is not None:
        if f.pattern_type == PatternType.MATCH:
            literal_hit = p.pattern_type == PatternType.LITERAL and p.name in (f.name, "*")
            prefix_hit = p.pattern_type == PatternType.PREFIXED and f.name.startswith(p.name)
            if not (literal_hit or prefix_hit):
                return False
        elif f.name != p.name:
            return False
    if f.pattern_type not in (PatternType.ANY, PatternType.MATCH, p.pattern_type):
        return False
    return (
        f.principal in (None, e.principal)
        and f.host in (None, e.host)
        and f.operation in (AclOperation.ANY, e.operation)
        and f.permission in (PermissionType.ANY, e.permission)
    )


filters = st.builds(
    AclBindingFilter,
    st.sampled_from([ResourceType.ANY, ResourceType.TOPIC, ResourceType.GROUP]),
    st.none() | names,
    st.sampled_from(
        [PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED]
    ),
    st.none() | principals,
    st.none() | hosts,
    st.sampled_from([AclOperation.ANY, AclOperation.READ, AclOperation.ALL]),
    st.sampled_from([PermissionType.ANY, A, D]),
)


@settings(max_examples=400, deadline=None)
@given(bindings=st.lists(st.tuples(patterns, entries), max_size=8), selector=filters)
def test_filters_select_what_kafka_selects(bindings, selector):
    auth = authorizer(*bindings)
    got = set(auth.matching_bindings(selector))
    expected = {
        AclBinding(p, e) for p, e in bindings if reference_filter(selector, AclBinding(p, e))
    }
    assert got == expected


def test_write_on_any_topic_kip_679():
    def by_type(*bindings, **kwargs) -> bool:
        return authorizer(*bindings, **kwargs).authorize_by_resource_type(
            "User:bob", "10.0.0.1", AclOperation.WRITE, TOPIC
        )

    write = entry(op=AclOperation.WRITE)
    deny = entry(op=AclOperation.WRITE, perm=D)
    assert by_type((ResourcePattern(TOPIC, "t"), write))
    assert by_type((ResourcePattern(TOPIC, "p", PatternType.PREFIXED), entry(op=AclOperation.ALL)))
    assert not by_type((ResourcePattern(TOPIC, "t"), entry(op=AclOperation.READ)))
    assert not by_type((ResourcePattern(ResourceType.GROUP, "t"), write))
    assert not by_type((ResourcePattern(TOPIC, "t"), write), (ResourcePattern(TOPIC, "t"), deny))
    assert not by_type(
        (ResourcePattern(TOPIC, "tx"), write),
        (ResourcePattern(TOPIC, "t", PatternType.PREFIXED), deny),
    )
    assert not by_type((ResourcePattern(TOPIC, "t"), write), (ResourcePattern(TOPIC, "*"), deny))
    assert by_type(
        (ResourcePattern(TOPIC, "t"), write), (ResourcePattern(TOPIC, "u"), deny)
    )  # a deny elsewhere does not shadow it
    assert by_type(super_users={"User:bob"})
    assert by_type(allow_everyone_if_no_acl_found=True)
    assert not by_type()
