"""`dpwatch apply` does not trust its file: size, nesting and alias limits before anything is built,
one line and exit 2 for a bad file, and `secret_env` only names DPWATCH_SECRET_ variables
(app/manifest/safe_yaml.py, app/manifest/schema.py; docs/sdk.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from app.manifest.plan import ManifestError
from app.manifest.safe_yaml import MAX_BYTES, check_events, load_yaml_file
from app.manifest.schema import Manifest

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
mechanisms: *i
"""


def _hwm_kb(pid: int) -> int:
    """The process's peak resident size since its exec (VmHWM, kB); 0 once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _run_measured(path: Path) -> tuple[int, str, float, float]:
    """`dpwatch apply -f path` in a process of its own: exit code, stderr, seconds, peak RSS (MB).

    The peak is the process's own VmHWM, read every 20 ms while it runs (it only rises, so the
    last reading before the exit is the peak up to 20 ms before it). Not wait4's ru_maxrss: Linux
    carries the high-water mark of the image before exec into it, which is the test worker's own
    (over 1 GB late in a parallel run), not the command's."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "apply", "-f", str(path), "--url", "http://127.0.0.1:9",
                             "--api-key", "dpw_x"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[2])
    deadline = started + 60
    peak_kb = 0
    while True:
        peak_kb = max(peak_kb, _hwm_kb(proc.pid))
        pid, status, _usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("apply ran for more than 60 s")
        time.sleep(0.02)
    stderr = proc.stderr.read() if proc.stderr else b""
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert peak_kb > 0, "the process's peak resident size was never read"
    return proc.returncode, stderr.decode(), time.monotonic() - started, peak_kb / 1024


@pytest.mark.parametrize("name, text, expect", [
    ("billion-laughs.yaml", BILLION_LAUGHS, "nodes once its aliases are expanded"),
    # libyaml's own scanner stops a flow this deep first ("exceeded maximum nesting depth").
    ("deep.yaml", "mechanisms: " + "[" * 100_000 + "]" * 100_000 + "\n", "nest"),
])
def test_hostile_manifests_exit_2_quickly_in_bounded_memory(tmp_path: Path, name: str, text: str, expect: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, stderr, seconds, peak_mb = _run_measured(path)
    assert code == 2, stderr
    assert expect in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr  # one line, no traceback
    assert seconds < 15, seconds
    assert peak_mb < 500, peak_mb


def test_a_31_mb_manifest_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as handle:
        handle.truncate(31 * 1024 * 1024)
    started = time.monotonic()
    with pytest.raises(ManifestError) as error:
        load_yaml_file(path)
    assert f"a manifest may hold at most {MAX_BYTES:,}" in str(error.value)
    assert time.monotonic() - started < 1


def test_deeply_nested_block_mappings_are_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep-maps.yaml"
    path.write_text("".join(f"{' ' * i}k{i}:\n" for i in range(2000)) + " " * 2000 + "v: 1\n")
    with pytest.raises(ManifestError) as error:
        load_yaml_file(path)
    assert "nests collections more than 64 deep (line 65" in str(error.value)
    assert "\n" not in str(error.value)


def test_limits_in_process(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="more than 3 aliases"):
        check_events("a: &x 1\nb: [*x, *x, *x, *x]\n", max_aliases=3)
    with pytest.raises(ManifestError, match="more than 10 nodes"):
        check_events("a: &x [1, 2, 3, 4, 5]\nb: [*x, *x]\n", max_nodes=10)
    with pytest.raises(ManifestError, match="more than 2 deep"):
        check_events("a: [[1]]\n", max_depth=2)
    check_events("a: [[1]]\n", max_depth=3)
    bad = tmp_path / "bad.yaml"
    bad.write_text("mechanisms: [1, 2\nmonitors: {")
    with pytest.raises(ManifestError) as error:
        load_yaml_file(bad)
    assert "is not valid YAML" in str(error.value) and "\n" not in str(error.value) and "line" in str(error.value)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"mechanisms: \xff\xfe\n")
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_yaml_file(binary)
    with pytest.raises(ManifestError, match="cannot read"):
        load_yaml_file(tmp_path / "missing.yaml")


def test_aliases_and_merge_keys_within_the_limits_still_load(tmp_path: Path) -> None:
    """A file that shares a common block by an anchor (what aliases are for) is read as before."""
    text = """\
defaults: &defaults {output_kind: real, timeout_seconds: 10}
mechanisms:
  - {<<: *defaults, name: a, sampling_url: "https://dp.example.org/a"}
  - {<<: *defaults, name: b, sampling_url: "https://dp.example.org/b"}
"""
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    data = load_yaml_file(path)
    assert data == yaml.safe_load(text)
    assert data["mechanisms"][1]["timeout_seconds"] == 10


@pytest.mark.parametrize("name, ok", [("DPWATCH_SECRET_SUM", True), ("DPWATCH_SECRET_a1_B", True),
                                      ("AWS_SECRET_ACCESS_KEY", False), ("HOME", False), ("DPWATCH_SECRET_", False),
                                      ("DPWATCH_API_KEY", False), ("dpwatch_secret_x", False),
                                      ("DPWATCH_SECRET_X-Y", False)])
def test_secret_env_names_only_the_declared_prefix(name: str, ok: bool) -> None:
    doc = {"mechanisms": [{"name": "m", "sampling_url": "https://dp.example.org/x", "output_kind": "real",
                           "secret_env": name}]}
    if ok:
        assert Manifest.model_validate(doc).mechanisms[0].secret_env == name
    else:
        with pytest.raises(Exception, match="must name an environment variable whose name starts with DPWATCH_SECRET_"):
            Manifest.model_validate(doc)


def test_a_secret_env_outside_the_prefix_exits_2_through_the_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from app.cli import app as cli

    path = tmp_path / "leak.yaml"
    path.write_text(yaml.safe_dump({"mechanisms": [{"name": "m", "sampling_url": "https://dp.example.org/x",
                                                    "output_kind": "real", "secret_env": "AWS_SECRET_ACCESS_KEY"}]}))
    result = CliRunner().invoke(cli, ["apply", "-f", str(path), "--url", "http://127.0.0.1:9", "--api-key", "dpw_x"],
                                env={"AWS_SECRET_ACCESS_KEY": "leaked"})
    assert result.exit_code == 2 and "DPWATCH_SECRET_" in result.stderr, result.output
    assert "leaked" not in result.output
