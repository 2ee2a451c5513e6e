"""`tributary configs ... --entity-type users` (users' SCRAM credentials) against an
in-process cluster of real brokers in a background thread (tests/support/cluster.py's
ClusterThread), as kafka-configs.sh --bootstrap-server does it: every broker's cache
follows, the output is kafka-configs', bad arguments are one line with exit 2, and no
password is ever printed."""

from __future__ import annotations

import io
import sys

import pytest

from tests.support.cluster import ClusterThread
from tools.cli import main

SECRET = "s3cret-Pa55"


@pytest.fixture
def runner():
    runner = ClusterThread(2)
    with runner:
        yield runner


@pytest.fixture
def run(runner, capsys, monkeypatch):
    def run(*argv: str):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
        code = main([*argv, "--bootstrap-server", runner.cluster.bootstrap])
        out, err = capsys.readouterr()
        assert SECRET not in out and SECRET not in err
        return code, out, err

    return run


def wait_for_caches(runner, expected: dict[str, list[str]]) -> None:
    runner.call(
        runner.cluster.until,
        lambda: all(users == expected for users in cached_users_now(runner)),
        f"every broker's cache is {expected}",
    )


def cached_users_now(runner) -> list[dict[str, list[str]]]:
    return [b.server.user_credentials.cache.users() for b in runner.cluster.live()]


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_users_scram_credentials_alter_describe_delete(run, runner):
    code, out, err = run(
        "configs", "alter", "--entity-type", "users", "--entity-name", "bob",
        "--add-config",
        f"SCRAM-SHA-512=[password={SECRET}],SCRAM-SHA-256=[iterations=8192,password={SECRET}]",
    )  # fmt: skip
    assert (code, out) == (0, "Completed updating config for user bob.\n"), err
    wait_for_caches(runner, {"bob": ["SCRAM-SHA-256", "SCRAM-SHA-512"]})
    code, out, _ = run("configs", "describe", "--entity-type", "users", "--entity-name", "bob")
    assert out == (
        "SCRAM credential configs for user-principal 'bob' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    run("configs", "alter", "--entity-type", "users", "--entity-name", "alice",
        "--add-config", f"SCRAM-SHA-256=[password={SECRET}]")  # fmt: skip
    code, out, _ = run("configs", "describe", "--entity-type", "users")
    assert out.splitlines() == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
    ]
    code, out, _ = run(
        "configs", "alter", "--entity-type", "users", "--entity-name", "bob",
        "--delete-config", "SCRAM-SHA-512",
    )  # fmt: skip
    assert (code, out) == (0, "Completed updating config for user bob.\n")
    wait_for_caches(runner, {"alice": ["SCRAM-SHA-256"], "bob": ["SCRAM-SHA-256"]})
    code, _, err = run(
        "configs", "alter", "--entity-type", "users", "--entity-name", "bob",
        "--delete-config", "SCRAM-SHA-512",
    )  # fmt: skip
    assert code == 1 and "RESOURCE_NOT_FOUND" in one_error_line(err)
    code, out, _ = run("configs", "describe", "--entity-type", "users", "--entity-name", "nobody")
    assert (code, out) == (0, "")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--add-config", f"SCRAM-SHA-1=[password={SECRET}]"], "not a user config"),
        (["--add-config", f"SCRAM-SHA-512=password={SECRET}"], "needs [password=...]"),
        (["--add-config", "SCRAM-SHA-512=[iterations=8192]"], "non-empty password"),
        (["--add-config", f"SCRAM-SHA-512=[pass={SECRET}]"], "takes password="),
        (["--add-config", f"SCRAM-SHA-512=[password={SECRET},iterations=x]"], "must be a number"),
        (
            [
                "--add-config",
                f"SCRAM-SHA-512=[password={SECRET}",
            ],
            "expected MECHANISM=",
        ),
        (["--delete-config", "SCRAM-SHA-1"], "not a user config"),
        ([], "needs --add-config or --delete-config"),
        (
            [
                "--add-config",
                f"SCRAM-SHA-512=[password={SECRET}]",
                "--delete-config",
                "SCRAM-SHA-512",
            ],
            "both added and deleted",
        ),
    ],
)
def test_bad_arguments_are_one_line_exit_2_without_the_password(run, argv, message):
    code, out, err = run(
        "configs", "alter", "--entity-type", "users", "--entity-name", "bob", *argv
    )
    assert code == 2 and message in one_error_line(err) and out == ""


def test_the_broker_refuses_too_few_iterations_and_a_name_is_required(run):
    code, _, err = run(
        "configs", "alter", "--entity-type", "users", "--entity-name", "bob",
        "--add-config", f"SCRAM-SHA-512=[iterations=1000,password={SECRET}]",
    )  # fmt: skip
    assert code == 1 and "UNACCEPTABLE_CREDENTIAL: Too few iterations" in one_error_line(err)
    code, _, err = run(
        "configs", "alter", "--entity-type", "users",
        "--add-config", f"SCRAM-SHA-512=[password={SECRET}]",
    )  # fmt: skip
    assert code == 2 and "--entity-name USER" in one_error_line(err)
