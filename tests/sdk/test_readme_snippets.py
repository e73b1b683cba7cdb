"""The README's user-side snippets run as written: a fresh project with its own `app` package (a
FastAPI service), the SDK installed into a venv of its own with the README's own `pip install`
line, the secret made by the README's own command, and the README's three files: the OpenDP
mechanism (with `enable_features("contrib")`), the service that mounts it, and the `assert_dp`
test, run by pytest."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import textwrap
import time
from pathlib import Path

from tests.sdk.test_sdk import ROOT, _pip, _run, _uv, _venv

README = ROOT / "README.md"
FILES = ("app/privacy.py", "app/main.py", "tests/test_privacy.py")


def _snippets() -> dict[str, str]:
    """The README's python blocks whose first line names a file (``# app/main.py``)."""
    found = {}
    for block in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S):
        first, _, rest = block.partition("\n")
        if first.startswith("# ") and first[2:].strip() in FILES:
            found[first[2:].strip()] = block
    return found


def _readme_line(prefix: str) -> str:
    line = next(line.strip() for line in README.read_text().splitlines() if line.strip().startswith(prefix))
    return line


SERVICE_CHECK = textwrap.dedent('''
    import json, os
    from fastapi.testclient import TestClient
    from dpwatch_sdk.protocol import sign
    import app.main

    body = json.dumps({"database": [1.0, 0.0], "n": 3, "request_id": "r-1", "monitor_id": "m", "period": 0}).encode()
    headers = {**sign(os.environ["DPWATCH_SECRET"], "r-1", body), "content-type": "application/json"}
    with TestClient(app.main.app, follow_redirects=False) as client:
        answer = client.post("/dp/", content=body, headers=headers)
        assert answer.status_code == 200 and len(answer.json()["samples"]) == 3, answer.text
        assert client.post("/dp", content=body, headers=headers).status_code == 307   # hence the slash
    print("served")
''')


def test_the_readmes_snippets_run_as_written(tmp_path: Path) -> None:
    started = time.monotonic()
    snippets = _snippets()
    assert sorted(snippets) == sorted(FILES), f"README blocks found: {sorted(snippets)}"
    install = _readme_line("pip install '/path/to/dpwatch/sdk/python[testing]'")
    packages = [arg.replace("/path/to/dpwatch", str(ROOT)) for arg in shlex.split(install)[2:]]
    python = _venv(tmp_path / "venv")
    uv = _uv()
    if uv is not None:
        _run([uv, "pip", "install", "-q", "--python", str(python), *packages])
    else:
        _pip(python, "install", "-q", *packages)
    secret_line = _readme_line("export DPWATCH_SECRET=$(python -c")
    code = shlex.split(secret_line.split("$(", 1)[1].rstrip(")"))[2]
    secret = _run([str(python), "-c", code]).stdout.strip()
    assert secret.startswith("whsec_")

    project = tmp_path / "project"
    (project / "app").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "app" / "__init__.py").write_text("")
    for name, text in snippets.items():
        (project / name).write_text(text)
    env = {**os.environ, "DPWATCH_SECRET": secret, "PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": "1"}
    for name in ("DPWATCH_SEED", "DPWATCH_BUDGET", "DPWATCH_COMMAND"):
        env.pop(name, None)
    served = _run([str(python), "-c", SERVICE_CHECK], cwd=project, env=env, timeout=300)
    assert served.stdout.strip().endswith("served")
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/test_privacy.py"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "assert_dp: opendp passes 1-DP" in done.stdout and "reproduce: DPWATCH_SEED=" in done.stdout
    assert "power: this run would have failed" in done.stdout
    print(f"README snippets in a fresh project: {time.monotonic() - started:.1f} s")
