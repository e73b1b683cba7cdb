"""One virtual environment per DP library, for the library adapters' tests and the pipeline corpus
(the libraries pin conflicting numpy, pandas and pyspark versions, and none of them belongs beside
the server). Each venv holds the library, numpy, pydantic (``app.reference`` imports it) and this
checkout's SDK (editable). They live in ``$DPWATCH_LIBRARY_VENVS`` or
``~/.cache/dpwatch/library-venvs`` and are built once; a failed install is remembered for the
process and reported as the reason to skip.

    python tests/library_venvs.py            # build them all, print what each holds
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "python"

#: library -> what pip installs besides numpy, pydantic and the SDK
LIBRARIES: dict[str, list[str]] = {
    "pipelinedp": ["pipeline-dp"],
    "pydp": ["python-dp"],
    "opendp": ["opendp[polars]"],
    "smartnoise": ["smartnoise-sql"],
    "tumult": ["tmlt.analytics"],
}
#: the module each library is imported as
MODULES = {"pipelinedp": "pipeline_dp", "pydp": "pydp", "opendp": "opendp", "smartnoise": "snsql",
           "tumult": "tmlt.analytics"}

_FAILED: dict[str, str] = {}


def home() -> Path:
    return Path(os.environ.get("DPWATCH_LIBRARY_VENVS") or Path.home() / ".cache" / "dpwatch" / "library-venvs")


def python_of(library: str, *, timeout: float = 1200) -> tuple[Path | None, str]:
    """The venv's interpreter for ``library`` (built if missing), or None and the reason."""
    if library in _FAILED:
        return None, _FAILED[library]
    venv = home() / library
    python = venv / "bin" / "python"
    home().mkdir(parents=True, exist_ok=True)
    with open(home() / f".{library}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        check = [str(python), "-c", f"import {MODULES[library]}, dpwatch_sdk, pydantic, numpy"]
        if python.exists() and subprocess.run(check, capture_output=True, timeout=120).returncode == 0:
            return python, ""
        try:
            if not python.exists():
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
            done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                   *LIBRARIES[library], "numpy", "pydantic", "-e", str(SDK)],
                                  capture_output=True, text=True, timeout=timeout)
        except (subprocess.SubprocessError, OSError) as exc:
            _FAILED[library] = f"{library}: the venv could not be built ({exc})"
            return None, _FAILED[library]
        if done.returncode != 0 or subprocess.run(check, capture_output=True, timeout=120).returncode != 0:
            _FAILED[library] = f"{library}: pip install {' '.join(LIBRARIES[library])} failed: {done.stderr[-600:]}"
            return None, _FAILED[library]
    return python, ""


def require_python(library: str) -> Path:
    """The library venv's interpreter for a test: skipped with pip's reason when the library cannot
    be installed here (no registry, no wheel for this platform), except under ``CI``, where a
    missing library is a failure, not a silent skip (as the browser tests do without Chromium)."""
    import pytest

    python, reason = python_of(library)
    if python is None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return python


def environment(library: str, python: Path) -> dict[str, str]:
    """The environment to run this checkout's code in the library's venv (Spark's workers use the
    same interpreter)."""
    # This checkout's code and SDK first: the venv's editable SDK may point at the checkout that built it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(SDK)]), "PYTHONWARNINGS": "ignore"}
    if library == "tumult":
        env["PYSPARK_PYTHON"] = str(python)
    return env


if __name__ == "__main__":
    for name in LIBRARIES:
        path, reason = python_of(name)
        print(f"{name:12s} {path or reason}")
