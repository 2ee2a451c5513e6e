"""What an ensemble and a chroot look like on disk and in the launcher's state, without
starting a JVM: each member's zoo.cfg names every server, its myid is its id, a single
server stays `zookeeper`, members are `zookeeper-1`..N with ports of their own, a
chroot is split off a connect string as kazoo and Kafka read it, and a bad one is
refused with a clear message. (tests/integration/test_zk_ensemble.py runs the real one.)
"""

from __future__ import annotations

import pytest

from server_common.zk_kazoo import split_chroot
from tools.cluster.ensemble import member
from tools.cluster.launcher import LauncherError, LocalCluster, _pick_port
from tools.cluster.state import ClusterState
from tools.cluster.zk_processes import zookeeper_infos
from tools.cluster.zookeeper import PeerPorts, free_port


def _config(path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_each_member_names_every_server_and_knows_its_id(tmp_path):
    peers = {sid: PeerPorts(2180 + sid, 2880 + sid, 3880 + sid) for sid in (1, 2, 3)}
    for sid in (1, 2, 3):
        server = member(tmp_path / f"zk-{sid}", sid, peers)
        config = _config(server.write_config())
        assert config["clientPort"] == str(peers[sid].client)
        for other, p in peers.items():
            assert config[f"server.{other}"] == f"127.0.0.1:{p.quorum}:{p.election}"
        assert "srvr" in config["4lw.commands.whitelist"].split(",")  # readiness: srvr
        assert (tmp_path / f"zk-{sid}" / "data" / "myid").read_text().strip() == str(sid)


def test_a_single_server_has_no_ensemble_lines(tmp_path):
    server = member(tmp_path, 1, {1: PeerPorts(2181, 0, 0)})
    config = _config(server.write_config())
    assert not any(key.startswith("server.") for key in config)
    assert not (tmp_path / "data" / "myid").exists()


@pytest.mark.parametrize(
    "connect, expected",
    [
        ("h:1", ("h:1", "")),
        ("h:1,g:2,f:3", ("h:1,g:2,f:3", "")),
        ("h:1,g:2/tributary", ("h:1,g:2", "/tributary")),
        ("h:1/a/b/", ("h:1", "/a/b")),
        ("h:1/", ("h:1", "")),
    ],
)
def test_split_chroot(connect, expected):
    assert split_chroot(connect) == expected


def test_launcher_names_ensemble_members_and_refuses_an_ambiguous_zookeeper(tmp_path):
    cluster = LocalCluster(tmp_path, zookeepers=3, zk_chroot="/tributary", base_port=None)
    taken: set[int] = set()

    def pick(_preferred: int | None) -> int:  # as the launcher picks: never a port twice
        port = _pick_port(None, taken)
        taken.add(port)
        return port

    infos = zookeeper_infos(tmp_path, 3, pick, base_ports=False)
    assert [z.name for z in infos] == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    ports = {p for z in infos for p in (z.port, z.quorum_port, z.election_port)}
    assert len(ports) == 9 and None not in ports
    cluster.state = ClusterState(str(tmp_path), "", processes=infos)
    assert cluster.process("zookeeper-2") is infos[1]
    assert cluster.process("zk-3") is infos[2]
    with pytest.raises(LauncherError, match="name one, e.g. zookeeper-1"):
        cluster.process("zookeeper")

    (info,) = zookeeper_infos(tmp_path, 1, lambda _: free_port(), base_ports=False)
    assert info.name == "zookeeper" and info.quorum_port is None


@pytest.mark.parametrize("chroot", ["tributary", "/a//b", "/a/../b", "/."])
def test_a_bad_chroot_is_refused(tmp_path, chroot):
    with pytest.raises(LauncherError, match="--zk-chroot"):
        LocalCluster(tmp_path, zk_chroot=chroot)


def test_zero_zookeepers_is_refused(tmp_path):
    with pytest.raises(LauncherError, match="--zookeepers 0"):
        LocalCluster(tmp_path, zookeepers=0)
