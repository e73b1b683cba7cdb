"""The SDK (sdk/python) from the main suite:

1. ``pip install ./sdk/python`` into a fresh virtual environment beside a FastAPI project that has
   its own ``app`` package works, pulls in none of the server's dependencies, and serves a signed
   request without numpy;
2. the SDK's own tests (OpenDP, diffprivlib, Flask, FastAPI, assert_dp against this checkout's
   dpwatch) run in the SDK's test environment, a separate venv (diffprivlib 0.6.6 cannot be
   imported beside the server's scikit-learn). That venv is built once per set of test
   dependencies and kept in ``~/.cache/dpwatch`` (``DPWATCH_SDK_TEST_VENV`` overrides it); the SDK
   itself is reinstalled from this checkout on every run.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "python"
SERVER_ONLY = {"numba", "scipy", "scikit-learn", "sqlalchemy", "psycopg", "psycopg-binary", "matplotlib", "opendp",
               "alembic", "apscheduler", "dp-accounting", "numpy", "dpwatch", "pydantic-settings", "typer",
               "structlog", "prometheus-client", "jinja2", "uvicorn"}
PIP_TIMEOUT = 900


def _run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = PIP_TIMEOUT) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({done.returncode}):\n{done.stdout[-4000:]}\n"
                             f"{done.stderr[-4000:]}")
    return done


def _venv(path: Path) -> Path:
    """A venv without its own pip (ensurepip costs 5-15 s here): this venv's pip installs into it
    with ``--python``."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(path)], timeout=120)
    return path / "bin" / "python"


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "pip", "--python", str(python), *args, "--disable-pip-version-check"])


USER_MAIN = '''
"""A user's FastAPI service: its own package is called `app`, like most."""
import os
import random

from fastapi import FastAPI

from dpwatch_sdk import Endpoint

service = FastAPI()


def noisy_count(database, n, rng):  # no numpy here: rng is a random.Random
    assert isinstance(rng, random.Random)
    return [len(database) + rng.gauss(0.0, 2.0) for _ in range(n)]


@service.get("/health")
def health():
    return {"ok": True}


service.mount("/dp", Endpoint(noisy_count, output="real", secret=os.environ["DPWATCH_SECRET"]).asgi)
'''

USER_CHECK = '''
import json, os, sys
import app, app.main
assert app.__file__.startswith(os.getcwd()), app.__file__          # the user's own `app`
from fastapi.testclient import TestClient
from dpwatch_sdk.protocol import sign
body = json.dumps({"database": [1, 2, 3], "n": 4, "request_id": "r-0", "monitor_id": "m", "period": 0}).encode()
headers = {**sign(os.environ["DPWATCH_SECRET"], "r-0", body), "content-type": "application/json"}
with TestClient(app.main.service) as client:
    assert client.get("/health").json() == {"ok": True}
    answer = client.post("/dp/", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["samples"]) == 4
    assert client.post("/dp/", content=body, headers={"content-type": "application/json"}).status_code == 401
try:
    import numpy  # noqa: F401
    sys.exit("numpy was installed")
except ImportError:
    pass
print("ok")
'''


def _uv() -> str | None:
    """uv (a dev dependency), unless ``DPWATCH_SDK_INSTALLER=pip`` asks for pip itself."""
    if os.environ.get("DPWATCH_SDK_INSTALLER", "uv") == "pip":
        return None
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


def test_pip_install_into_a_fresh_venv_beside_a_users_app_package(tmp_path):
    """The install resolves ./sdk/python's requirements from the package index into an empty venv.
    uv does it when installed (about 1 s with a warm cache, against 11-13 s for pip here, which looks
    the index up one package at a time); it reads the same PEP 621 metadata, builds the SDK with the
    same PEP 517 backend (flit_core) and installs the same wheels. pip then checks the result
    (``pip check``: every installed distribution's requirements are met, as pip sees them).
    ``DPWATCH_SDK_INSTALLER=pip`` installs with pip itself."""
    started = time.monotonic()
    python = _venv(tmp_path / "venv")
    uv = _uv()
    if uv is not None:
        _run([uv, "pip", "install", "-q", "--python", str(python), str(SDK), "fastapi"])
        installed = _run([uv, "pip", "list", "--python", str(python), "--format", "freeze"]).stdout
        _pip(python, "check")
    else:
        _pip(python, "install", "-q", str(SDK), "fastapi")
        installed = _pip(python, "list", "--format=freeze").stdout
    names = {line.split("==")[0].lower().replace("_", "-") for line in installed.splitlines() if "==" in line}
    assert "dpwatch-sdk" in names
    assert not names & SERVER_ONLY, f"server dependencies pulled in: {sorted(names & SERVER_ONLY)}"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    assert not (site / "app").exists() and not (site / "app.py").exists(), "something installed imports as `app`"
    project = tmp_path / "project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "__init__.py").write_text("")
    (project / "app" / "main.py").write_text(textwrap.dedent(USER_MAIN))
    env = {**os.environ, "DPWATCH_SECRET": "whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "PYTHONPATH": ""}
    done = _run([str(python), "-c", USER_CHECK], cwd=project, env=env, timeout=120)
    assert done.stdout.strip().endswith("ok")
    print(f"fresh venv + install ({'uv' if uv else 'pip'}) + check: {time.monotonic() - started:.1f} s")


def _test_venv() -> Path:
    """The SDK's test venv with its test dependencies, built once per version of
    sdk/python/pyproject.toml (under a lock, so that parallel runs build it once)."""
    key = hashlib.sha256((SDK / "pyproject.toml").read_bytes() + sys.version.encode()).hexdigest()[:12]
    base = Path(os.environ.get("DPWATCH_SDK_TEST_VENV") or Path.home() / ".cache" / "dpwatch" / f"sdk-test-venv-{key}")
    base.parent.mkdir(parents=True, exist_ok=True)
    with open(base.parent / f".{base.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (base / ".complete").exists():
            shutil.rmtree(base, ignore_errors=True)
            python = _venv(base)
            # The test extra's third-party packages (not the SDK itself, which each run reinstalls).
            uv = _uv()
            if uv is not None:
                _run([uv, "pip", "install", "-q", "--python", str(python), "flit_core>=3.9,<4", f"{SDK}[test]"])
            else:
                _pip(python, "install", "-q", "flit_core>=3.9,<4", f"{SDK}[test]")
            (base / ".complete").write_text(key)
    return base


def test_the_sdk_suite_in_its_own_venv(tmp_path):
    started = time.monotonic()
    venv = _test_venv()
    python = venv / "bin" / "python"
    built = time.monotonic()
    # This checkout's SDK, not an editable link to another one.
    _pip(python, "install", "-q", "--no-deps", "--no-build-isolation", "--force-reinstall", str(SDK))
    dpwatch = Path(sys.executable).parent / "dpwatch"
    assert dpwatch.exists(), "the server's venv has no dpwatch command"
    env = {**os.environ, "DPWATCH_COMMAND": str(dpwatch), "PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                           "--rootdir", str(SDK), str(SDK / "tests")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    tail = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and " skipped" not in done.stdout.splitlines()[-1], tail
    print(f"SDK venv ready in {built - started:.1f} s; reinstall and SDK tests in {time.monotonic() - built:.1f} s")
