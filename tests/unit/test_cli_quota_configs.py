"""`tributary configs ... --entity-type clients|users` and `--user`/`--client` (client
quotas) against an in-process cluster of real brokers in a background thread
(tests/support/cluster.py's ClusterThread), as kafka-configs.sh --bootstrap-server does
it: kafka-configs' output, a (user, client-id) entity, defaults, the broker's refusal,
and bad arguments as one line with exit 2."""

from __future__ import annotations

import pytest

from tests.unit.test_cli_user_configs import one_error_line, run, runner  # noqa: F401


def test_quotas_are_altered_and_described_like_kafka_configs(run):  # noqa: F811
    code, out, _ = run(
        "configs", "alter", "--entity-type", "clients", "--entity-name", "app",
        "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    )  # fmt: skip
    assert code == 0 and out == "Completed updating config for client-id 'app'.\n"
    code, out, _ = run(
        "configs", "alter", "--user", "alice", "--client-defaults",
        "--add-config", "request_percentage=25.5",
    )  # fmt: skip
    assert code == 0
    code, out, _ = run("configs", "alter", "--entity-type", "users", "--entity-default",
                       "--add-config", "producer_byte_rate=1000")  # fmt: skip
    assert code == 0 and "the default user-principal" in out

    code, out, _ = run("configs", "describe", "--entity-type", "clients", "--entity-name", "app")
    assert code == 0
    assert out == (
        "Quota configs for client-id 'app' are "
        "consumer_byte_rate=2097152.0,producer_byte_rate=1048576.0\n"
    )
    code, out, _ = run("configs", "describe", "--user", "alice", "--client-defaults")
    assert out == (
        "Quota configs for user-principal 'alice', the default client-id are "
        "request_percentage=25.5\n"
    )
    code, out, _ = run("configs", "describe", "--entity-type", "users", "--entity-default")
    assert out == "Quota configs for the default user-principal are producer_byte_rate=1000.0\n"

    code, out, _ = run(
        "configs", "alter", "--entity-type", "clients", "--entity-name", "app",
        "--delete-config", "consumer_byte_rate",
    )  # fmt: skip
    assert code == 0
    code, out, _ = run("configs", "describe", "--entity-type", "clients")
    assert out == "Quota configs for client-id 'app' are producer_byte_rate=1048576.0\n"


def test_the_broker_refuses_a_fractional_byte_rate(run):  # noqa: F811
    code, _, err = run(
        "configs", "alter", "--entity-type", "clients", "--entity-name", "app",
        "--add-config", "producer_byte_rate=1.5",
    )  # fmt: skip
    assert code == 1 and "must be a Long value" in one_error_line(err)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--entity-type", "clients", "--add-config", "producer_byte_rate=1"], "needs a name"),
        (["--entity-type", "clients", "--entity-name", "a", "--add-config", "x=1"], "not a quota"),
        (["--client", "a", "--add-config", "producer_byte_rate=fast"], "must be a number"),
        (
            [
                "--client",
                "a",
                "--entity-type",
                "clients",
                "--entity-name",
                "b",
                "--add-config",
                "producer_byte_rate=1",
            ],
            "named twice",
        ),  # fmt: skip
        (["--client", "a"], "needs --add-config or --delete-config"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(run, argv, message):  # noqa: F811
    code, out, err = run("configs", "alter", *argv)
    assert code == 2 and message in one_error_line(err) and out == ""
