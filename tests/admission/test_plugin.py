"""`kubectl-priority`: kubectl's flag conventions translated to the commands' own options."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook.commands import kubectl as plugin
from webhook.files.documents import InputError


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["review", "d.yaml", "-n", "shop"], ["review", "d.yaml", "--namespace", "shop"]),
        (
            ["review", "-n=shop", "d.yaml", "-o", "json"],
            ["review", "d.yaml", "-o", "json", "--namespace", "shop"],
        ),
        (["review", "d.yaml", "--context", "prod"], ["review", "d.yaml"]),  # offline: no cluster is read
        (["-n", "shop", "review", "d.yaml"], ["review", "d.yaml", "--namespace", "shop"]),
        (
            ["victims", "--node", "n1", "--pod", "p.yaml", "--kubeconfig", "k", "--context", "c"],
            ["victims", "--node", "n1", "--pod", "p.yaml", "--kubeconfig", "k", "--context", "c"],
        ),
        (["victims", "--node", "n1", "--pod", "p.yaml"], ["victims", "--node", "n1", "--pod", "p.yaml"]),
        (
            ["victims", "--node", "n.json", "--pods", "ps.json", "--pod", "p.yaml", "--kubeconfig", "k"],
            ["victims", "--node", "n.json", "--pods", "ps.json", "--pod", "p.yaml"],
        ),
        (
            ["plan", "--cluster", "c.json", "--pod", "p.yaml", "--context", "x"],
            ["plan", "--cluster", "c.json", "--pod", "p.yaml"],
        ),
    ],
)
def test_translate(argv, expected):
    assert plugin.translate(argv) == expected


def test_plan_reads_the_cluster_of_the_context_when_it_can():
    if "--kubeconfig" not in plugin._options("plan"):
        with pytest.raises(InputError, match="--cluster FILE is needed"):
            plugin.translate(["plan", "--pod", "p.yaml"])
    else:
        assert plugin.translate(["plan", "--pod", "p.yaml", "--kubeconfig", "k"])[-2:] == [
            "--kubeconfig",
            "k",
        ]


def test_a_context_becomes_a_private_kubeconfig_for_a_command_without_context(tmp_path):
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "a",
        "contexts": [
            {"name": "a", "context": {"cluster": "ca", "user": "ua"}},
            {"name": "b", "context": {"cluster": "cb", "user": "ub"}},
        ],
        "clusters": [
            {"name": "ca", "cluster": {"server": "https://127.0.0.1:1"}},
            {"name": "cb", "cluster": {"server": "https://127.0.0.1:2"}},
        ],
        "users": [{"name": "ua", "user": {"token": "x"}}, {"name": "ub", "user": {"token": "y"}}],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    flags = plugin._kubectl_flags(["--kubeconfig", str(path), "--context", "b"])[0]
    out = plugin._cluster_flags(flags, {"--kubeconfig"})
    try:
        written = yaml.safe_load(Path(out[1]).read_text())
        assert written["current-context"] == "b"
        assert [c["name"] for c in written["clusters"]] == ["cb"] and [
            u["name"] for u in written["users"]
        ] == ["ub"]
        with pytest.raises(InputError, match='context "z": not found'):
            plugin._cluster_flags(
                plugin._kubectl_flags(["--kubeconfig", str(path), "--context", "z"])[0], {"--kubeconfig"}
            )
    finally:
        for p in plugin._TEMPORARY:
            Path(p).unlink()
        plugin._TEMPORARY.clear()


def test_usage_and_unknown_commands(capsys):
    assert plugin.main([]) == 2 and "usage: kubectl priority" in capsys.readouterr().out
    assert plugin.main(["--help"]) == 0
    assert plugin.main(["certs"]) == 2
    assert (
        capsys.readouterr().err == "kubectl priority: error: expected one of review, victims, plan "
        "(see kubectl priority --help)\n"
    )


def test_plan_is_given_the_default_kubeconfig_by_name_or_merged(tmp_path, monkeypatch):
    one = tmp_path / "one"
    one.write_text(
        yaml.safe_dump(
            {
                "current-context": "a",
                "contexts": [{"name": "a", "context": {"cluster": "c"}}],
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": "ca.crt"},
                    }
                ],
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(one))
    flags = plugin._kubectl_flags([])[0]
    assert plugin._cluster_flags(flags, {"--kubeconfig"}, explicit=True) == ["--kubeconfig", str(one)]
    assert plugin._cluster_flags(flags, {"--kubeconfig"}) == []  # a command that follows kubectl's defaults
    two = tmp_path / "two"
    two.write_text(
        yaml.safe_dump({"current-context": "b", "contexts": [{"name": "b", "context": {"cluster": "c"}}]})
    )
    monkeypatch.setenv("KUBECONFIG", f"{one}:{two}")
    try:
        merged = plugin._cluster_flags(flags, {"--kubeconfig"}, explicit=True)[1]
        written = yaml.safe_load(Path(merged).read_text())
        assert written["current-context"] == "a"  # the first file that names one wins, as kubectl
        assert written["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "ca.crt")
    finally:
        for p in plugin._TEMPORARY:
            Path(p).unlink()
        plugin._TEMPORARY.clear()
