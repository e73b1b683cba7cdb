"""The CLI's operations details."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from app.settings import Settings, listen_url, with_listen_address


@pytest.mark.parametrize(("host", "port", "url"), [
    ("127.0.0.1", 8400, "http://127.0.0.1:8400"),
    ("0.0.0.0", 8401, "http://127.0.0.1:8401"),
    ("::", 8402, "http://127.0.0.1:8402"),
    ("::1", 8403, "http://[::1]:8403"),
    ("dpwatch.internal", 80, "http://dpwatch.internal:80"),
])
def test_listen_url(host: str, port: int, url: str) -> None:
    assert listen_url(host, port) == url


def test_public_url_follows_the_port_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPWATCH_PUBLIC_URL", raising=False)
    assert with_listen_address(Settings(), "0.0.0.0", 8405).public_url == "http://127.0.0.1:8405"
    monkeypatch.setenv("DPWATCH_PUBLIC_URL", "https://dpwatch.example.org/")
    assert with_listen_address(Settings(), "0.0.0.0", 8405).public_url == "https://dpwatch.example.org"


def test_serve_passes_the_port_to_public_url(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    """`dpwatch serve --port 8406` builds its app with PUBLIC_URL on that port (generatorURL links)."""
    import uvicorn

    import app.main
    from app.cli import app as cli

    monkeypatch.delenv("DPWATCH_PUBLIC_URL", raising=False)
    monkeypatch.setenv("DPWATCH_DATABASE_URL", f"sqlite:///{tmp_path}/x.db")
    seen: dict[str, object] = {}
    monkeypatch.setattr(app.main, "create_app", lambda settings: seen.setdefault("settings", settings) and object())
    monkeypatch.setattr(uvicorn, "run", lambda api, **kw: seen.update(kw))
    result = CliRunner().invoke(cli, ["serve", "--port", "8406", "--no-worker"])
    assert result.exit_code == 0, result.output
    assert seen["port"] == 8406 and seen["settings"].public_url == "http://127.0.0.1:8406"  # type: ignore[attr-defined]


HEAVY = ("pydantic", "rich", "numpy", "scipy", "sqlalchemy", "fastapi", "httpx", "app.main", "app.stats")


@pytest.mark.parametrize("argv", [["--help"], ["audit"], ["threshold", "--bogus"], ["audit", "--help"],
                                  ["demo", "--help"], ["keys", "--help"], ["--version"],
                                  ["audit", "http://127.0.0.1:9/"],
                                  ["audit", "http://127.0.0.1:9/", "--pairs", "[]", "--epsilon", "1", "--mu", "1"],
                                  ["search", "http://127.0.0.1:9/"],
                                  ["search", "http://127.0.0.1:9/", "--domain", "{}"],
                                  ["secret"], ["secret", "--check", "whsec_abc"]])
def test_help_and_usage_errors_import_nothing_heavy(argv: list[str]) -> None:
    """`dpwatch --help` and a usage error took 5–8 s on a busy machine because every
    command imported everything; each command imports what it needs when it runs (bench/cli_speed.py
    measures the time)."""
    import json
    import subprocess
    import sys

    code = ("import sys, json\nsys.argv = ['dpwatch', *json.loads(sys.argv[1])]\nfrom app.cli import app\n"
            "try:\n    app()\nexcept SystemExit as e:\n    code = e.code\n"
            f"print(json.dumps([m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m in {HEAVY!r}]))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], capture_output=True, text=True, timeout=60)
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == [], loaded


def test_help_lists_every_command_with_a_whole_sentence() -> None:
    from app.cli import app as cli

    out = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    commands = out.split("Commands:")[1].strip().splitlines()
    assert len(commands) >= 12
    for line in commands:
        assert line.rstrip().endswith(".") and "..." not in line and len(line) <= 80, line


@pytest.mark.parametrize("command", [["audit", "http://127.0.0.1:9/x", "--pairs", '[{"x": [0], "x_prime": [1]}]'],
                                     ["search", "http://127.0.0.1:9/x", "--domain", "{}", "--epsilon", "1"]])
def test_allow_networks_errors_name_the_flag(command: list[str]) -> None:
    from app.cli import app as cli

    result = CliRunner().invoke(cli, [*command, "--allow-networks", "127.0.0.0/8,bogus"])
    assert result.exit_code == 2
    assert "--allow-networks: 'bogus' is not a CIDR range" in result.output and "allow_networks" not in result.output


@pytest.mark.parametrize("command", ["simulate", "audit", "search", "demo", "threshold"])
def test_help_never_splits_a_flag_or_a_word_at_a_hyphen(command: str) -> None:
    """A help text broke "--long-run" into "--long-" / "run" (click wraps at hyphens by default)."""
    from app.cli import app as cli

    for width in (60, 80, 100):
        out = CliRunner().invoke(cli, [command, "--help"], terminal_width=width).output
        for line in out.splitlines():
            assert not line.rstrip().endswith("-") or line.strip() == "-", (width, line)


def _commands(group, path):  # type: ignore[no-untyped-def]
    import click

    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, [*path, name])
        else:
            yield [*path, name], command


def test_every_option_of_every_command_has_help() -> None:
    """`--json`, `--seed`, `--max-batch`, … had no help text: every option says what it does."""
    import click
    from typer.main import get_command

    from app.cli import app as cli

    root = get_command(cli)
    missing = [(" ".join(path), option.opts[0]) for path, command in _commands(root, ["dpwatch"])
               for option in command.params if isinstance(option, click.Option) and not (option.help or "").strip()]
    missing += [("dpwatch", option.opts[0]) for option in root.params
                if isinstance(option, click.Option) and not (option.help or "").strip()]
    assert missing == [], missing
    assert len(list(_commands(root, ["dpwatch"]))) >= 14


def test_version_and_secret() -> None:
    from dpwatch_sdk.protocol import validate_secret

    from app.cli import app as cli

    version = CliRunner().invoke(cli, ["--version"])
    assert version.exit_code == 0 and version.output.startswith("dpwatch 0.") and "dpwatch-sdk" in version.output
    made = CliRunner().invoke(cli, ["secret"])
    assert made.exit_code == 0 and len(validate_secret(made.stdout.strip())) == 32
    assert CliRunner().invoke(cli, ["secret", "--check", made.stdout.strip()]).exit_code == 0
    bad = CliRunner().invoke(cli, ["secret", "--check", "whsec_c2hvcnQ="])
    assert bad.exit_code == 2 and "at least 16 are needed" in bad.output


@pytest.mark.parametrize(("argv", "message"), [
    (["audit", "http://127.0.0.1:9/"], "give --pairs"),
    (["audit", "http://127.0.0.1:9/", "--pairs", "[]", "--epsilon", "1", "--rho", "1"], "give one claim"),
    (["search", "http://127.0.0.1:9/"], "give --domain"),
    (["search", "http://127.0.0.1:9/", "--domain", "{}"], "give one claim"),
])
def test_usage_errors_name_the_problem(argv: list[str], message: str) -> None:
    from app.cli import app as cli

    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2 and message in result.output
