"""`tributary acls --add|--remove|--list` (kafka-acls.sh's layout): bad arguments are one
line and exit 2 before anything is sent; against an in-process cluster of real brokers
with the authorizer on (tests/support/cluster.py's ClusterThread, over TCP) the ACLs
added are listed in kafka-acls' format, stored in ZooKeeper exactly where and as Kafka
2.8 stores them (with the change notifications), enforced, and removed.
"""

from __future__ import annotations

import json

import pytest

from server_common.zk import NoNodeError
from tests.support.cluster import ClusterThread
from tools.cli import main

DEAD_BROKER = "127.0.0.1:1"
AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
    "authorizer.inter.broker.listener.super.user": "true",  # the CLI is ANONYMOUS on it
}


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["acls", "--add", "--topic", "t"], "--allow-principal or --deny-principal"),
        (["acls", "--add", "--allow-principal", "User:bob"], "needs a resource"),
        (["acls", "--add", "--allow-principal", "bob", "--topic", "t"], "TYPE:NAME"),
        (["acls", "--add", "--allow-principal", "User:bob", "--topic", "t", "--operation",
          "Fly"], "unknown 'Fly'"),
        (["acls", "--add", "--allow-principal", "User:bob", "--topic", "t",
          "--resource-pattern-type", "match"], "literal or prefixed"),
        (["acls", "--remove", "--allow-principal", "User:bob"], "needs a resource"),
        (["acls", "--list", "--principal", "bob"], "TYPE:NAME"),
        (["acls", "--list", "--topic", ""], "empty"),
        (["acls", "--add", "--consumer", "--allow-principal", "User:bob", "--topic", "t"],
         "--consumer needs --group"),
        (["acls", "--add", "--producer", "--allow-principal", "User:bob", "--topic", "t",
          "--operation", "Read"], "--operation cannot be used"),
        (["acls", "--add", "--producer", "--allow-principal", "User:bob", "--group", "g"],
         "need --topic"),
        (["acls", "--add", "--allow-principal", "User:bob", "--group", "g", "--operation",
          "Write"], "ResourceType GROUP only supports operations ALL,READ,DELETE,DESCRIBE"),
        (["acls", "--add", "--idempotent", "--allow-principal", "User:bob", "--topic", "t"],
         "--idempotent goes with --producer"),
        (["acls", "--add", "--allow-principal", "User:bob", "--transactional-id", ""],
         "--transactional-id: the name is empty"),
        (["acls", "--add", "--allow-principal", "User:bob", "--transactional-id", "tx",
          "--operation", "Read"],
         "ResourceType TRANSACTIONAL_ID only supports operations ALL,WRITE,DESCRIBE"),
        (["acls", "--add", "--producer", "--allow-principal", "User:bob",
          "--transactional-id", "tx"], "need --topic"),
    ],
)  # fmt: skip
def test_bad_arguments_are_one_line_and_exit_2(argv, says, capsys):
    assert main([*argv, "--bootstrap-server", DEAD_BROKER]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert says in line, line


def test_no_action_is_a_usage_error(capsys):
    assert main(["acls", "--topic", "t"]) == 2
    assert "one of the arguments --add --remove --list is required" in capsys.readouterr().err


@pytest.fixture(scope="module")
def runner():
    runner = ClusterThread(2, topics={"orders": 1}, broker_settings=AUTHORIZER)
    with runner:
        yield runner


@pytest.fixture
def run(runner, capsys):
    def run(*argv: str):
        code = main([*argv, "--bootstrap-server", runner.cluster.bootstrap])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def znode(runner, path: str):
    async def read():
        zk = runner.cluster.brokers[1].server.gateway.zk
        try:
            return (await zk.get(path))[0]
        except NoNodeError:
            return None

    return runner.call(read)


def children(runner, path: str) -> list[str]:
    async def read():
        return await runner.cluster.brokers[1].server.gateway.zk.get_children_or_empty(path)

    return runner.call(read)


def acls_of_every_broker(runner) -> list[set]:
    return [
        {str(b) for b in broker.server.acls.authorizer.bindings()}
        for broker in runner.cluster.brokers.values()
    ]


def test_add_list_store_and_remove(run, runner):
    code, out, err = run(
        "acls", "--add", "--allow-principal", "User:bob", "--operation", "Read",
        "--operation", "Describe", "--topic", "orders",
    )  # fmt: skip
    assert code == 0, err
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, " in out
    assert " \t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW) " in out

    code, out, err = run(
        "acls", "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9",
        "--group", "app-", "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    assert code == 0, err

    # Stored as Kafka 2.8 stores them: the literal ACLs of /kafka-acl/Topic/orders, the
    # prefixed ones under /kafka-acl-extended/prefixed, each change announced.
    stored = json.loads(znode(runner, "/kafka-acl/Topic/orders"))
    assert stored["version"] == 1
    assert sorted(stored["acls"], key=lambda a: a["operation"]) == [
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Describe", "host": "*"},
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"},
    ]
    assert json.loads(znode(runner, "/kafka-acl-extended/prefixed/Group/app-")) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:mallory",
                "permissionType": "Deny",
                "operation": "All",
                "host": "10.0.0.9",
            }
        ],
    }
    literal_changes = children(runner, "/kafka-acl-changes")
    assert literal_changes and all(c.startswith("acl_changes_") for c in literal_changes)
    assert znode(runner, f"/kafka-acl-changes/{literal_changes[0]}") == b"TOPIC:orders"
    (extended,) = children(runner, "/kafka-acl-extended-changes")
    assert json.loads(znode(runner, f"/kafka-acl-extended-changes/{extended}")) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "app-",
        "patternType": "PREFIXED",
    }

    code, out, err = run("acls", "--list")
    assert code == 0, err
    assert out.count("Current ACLs for resource") == 2
    assert (
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=app-, "
        "patternType=PREFIXED)`: \n \t(principal=User:mallory, host=10.0.0.9, "
        "operation=ALL, permissionType=DENY) \n"
    ) in out

    code, out, err = run("acls", "--list", "--topic", "orders", "--resource-pattern-type", "match")
    assert code == 0 and "User:bob" in out and "mallory" not in out

    code, out, err = run(
        "acls", "--remove", "--allow-principal", "User:bob", "--operation", "Read",
        "--topic", "orders",
    )  # fmt: skip
    assert code == 0, err
    assert "operation=READ" in out
    stored = json.loads(znode(runner, "/kafka-acl/Topic/orders"))
    assert [a["operation"] for a in stored["acls"]] == ["Describe"]

    code, out, err = run("acls", "--remove", "--topic", "orders")
    assert code == 0, err
    assert znode(runner, "/kafka-acl/Topic/orders") is None
    code, out, err = run(
        "acls", "--remove", "--group", "app-", "--resource-pattern-type", "prefixed"
    )
    assert code == 0, err

    def every_broker_is_empty() -> bool:
        return all(not acls for acls in acls_of_every_broker(runner))

    runner.call(runner.cluster.until, every_broker_is_empty, "every broker dropped the ACLs")


def test_producer_and_consumer_conveniences(run, runner):
    code, out, err = run(
        "acls", "--add", "--producer", "--idempotent", "--allow-principal", "User:p",
        "--topic", "orders",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run(
        "acls", "--add", "--consumer", "--allow-principal", "User:c", "--topic", "orders",
        "--group", "readers",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run("acls", "--list", "--principal", "User:p")
    assert code == 0, err
    lines = [line for line in out.splitlines() if "operation=" in line]
    assert sorted(line.split("operation=")[1].split(",")[0] for line in lines) == [
        "CREATE", "DESCRIBE", "IDEMPOTENT_WRITE", "WRITE"
    ]  # fmt: skip
    code, out, err = run("acls", "--list", "--principal", "User:c")
    assert "resourceType=GROUP, name=readers" in out and out.count("operation=") == 3

    code, out, err = run(
        "acls", "--remove", "--producer", "--idempotent", "--allow-principal", "User:p",
        "--topic", "orders",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run(
        "acls", "--remove", "--consumer", "--allow-principal", "User:c", "--topic", "orders",
        "--group", "readers",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run("acls", "--list")
    assert code == 0 and out == ""
