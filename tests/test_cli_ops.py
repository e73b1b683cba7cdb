"""The CLI's operations details (issue 18 items 8 and 9)."""

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
