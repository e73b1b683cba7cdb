"""Memory of an SDK endpoint under concurrent large bodies (docs/hardening.md, "The SDK endpoint").

The endpoint runs in a process of its own (this script with ``--serve asgi|wsgi``): under uvicorn
(``endpoint.asgi``) or on the SDK's own server (``endpoint.start()``, the standard library's WSGI
server with the SDK's fixed pool). ``--clients`` raw sockets then each send a POST declaring
``--mib`` MiB and stream that many bytes, all at once, in one of three kinds:

- ``unsigned``: no signature headers;
- ``forged``: signature headers of the right form and a fresh timestamp, but a wrong signature (the
  body must be read before the signature can be checked: the budget ``max_buffered_bytes`` bounds
  how many are held at once);
- ``chunked-unsigned``: no signature, ``Transfer-Encoding: chunked``.

The table gives the endpoint's resident memory before, its peak during (sampled every 10 ms from
/proc) and 1 s after, the peak's increase, the statuses the clients got, and the endpoint's thread
count at its peak. ``--sdk PATH`` runs the endpoint on another checkout's SDK (e.g. the main
branch's, for a before/after).

    .venv/bin/python bench/sdk_body.py [--clients 64] [--mib 16] [--kinds unsigned,forged] [--sdk PATH]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent
SECRET = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def serve(mode: str, port_file: str) -> None:
    from dpwatch_sdk import Endpoint

    def sample(database, n, rng):  # noqa: ANN001, ANN202
        return rng.laplace(0.0, 1.0, n)

    endpoint = Endpoint(sample, output="real", secret=SECRET)
    if mode == "asgi":
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        pathlib.Path(port_file).write_text(str(sock.getsockname()[1]))
        config = uvicorn.Config(endpoint.asgi, log_level="error", lifespan="off", access_log=False,
                                http="h11", loop="asyncio", backlog=512)
        uvicorn.Server(config).run(sockets=[sock])
    else:
        server = endpoint.start()
        pathlib.Path(port_file).write_text(str(server.port))
        while True:
            time.sleep(3600)


def rss_kib(pid: int) -> tuple[int, int]:
    fields = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    return int(fields["VmRSS"][0]), int(fields["Threads"][0])


def client(port: int, kind: str, size: int, statuses: list[str]) -> None:
    headers = ["POST / HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if kind.startswith("chunked"):
        headers.append("Transfer-Encoding: chunked")
    else:
        headers.append(f"Content-Length: {size}")
    if kind == "forged":
        headers += ["webhook-id: bench", f"webhook-timestamp: {int(time.time())}",
                    "webhook-signature: v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
    piece = b"0" * (1 << 20)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
            sent = 0
            try:
                while sent < size:
                    part = piece[: min(len(piece), size - sent)]
                    if kind.startswith("chunked"):
                        sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                    else:
                        sock.sendall(part)
                    sent += len(part)
                if kind.startswith("chunked"):
                    sock.sendall(b"0\r\n\r\n")
            except OSError:
                pass  # the endpoint answered and closed before the body was sent: as it should
            sock.settimeout(60)
            try:
                answer = sock.recv(64)
            except OSError as exc:
                answer = type(exc).__name__.encode()
            statuses.append(answer.split(b"\r\n", 1)[0].decode(errors="replace")[9:12] or "closed")
    except OSError as exc:
        statuses.append(type(exc).__name__)


def run(mode: str, kind: str, clients: int, mib: int, sdk: str | None) -> dict:
    port_file = f"/tmp/sdk_body_{os.getpid()}_{mode}.port"
    pathlib.Path(port_file).unlink(missing_ok=True)
    env = dict(os.environ)
    sdk_path = sdk or str(ROOT / "sdk" / "python")
    env["PYTHONPATH"] = sdk_path + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, __file__, "--serve", mode, "--port-file", port_file], env=env)
    try:
        deadline = time.monotonic() + 30
        while not pathlib.Path(port_file).exists() or not pathlib.Path(port_file).read_text():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the endpoint did not start")
            time.sleep(0.05)
        port = int(pathlib.Path(port_file).read_text())
        time.sleep(0.5)
        before, _ = rss_kib(proc.pid)
        peak, peak_threads = before, 0
        statuses: list[str] = []
        threads = [threading.Thread(target=client, args=(port, kind, mib << 20, statuses)) for _ in range(clients)]
        started = time.monotonic()
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            rss, nthreads = rss_kib(proc.pid)
            peak, peak_threads = max(peak, rss), max(peak_threads, nthreads)
            time.sleep(0.01)
        elapsed = time.monotonic() - started
        time.sleep(1.0)
        after, _ = rss_kib(proc.pid)
        return {"mode": mode, "kind": kind, "before": before / 1024, "peak": peak / 1024, "after": after / 1024,
                "added": (peak - before) / 1024, "threads": peak_threads, "seconds": elapsed,
                "statuses": dict(Counter(statuses))}
    finally:
        proc.terminate()
        proc.wait(10)
        pathlib.Path(port_file).unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", choices=["asgi", "wsgi"])
    parser.add_argument("--port-file")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--modes", default="asgi,wsgi")
    parser.add_argument("--kinds", default="unsigned,chunked-unsigned,forged")
    parser.add_argument("--sdk", help="the sdk/python folder of another checkout")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port_file)
        return
    print(f"{args.clients} concurrent bodies of {args.mib} MiB; SDK: {args.sdk or ROOT / 'sdk' / 'python'}")
    print("| server | bodies | RSS before (MB) | peak (MB) | added (MB) | 1 s after (MB) | threads at peak "
          "| seconds | statuses |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        for kind in args.kinds.split(","):
            r = run(mode, kind, args.clients, args.mib, args.sdk)
            print(f"| {r['mode']} | {r['kind']} | {r['before']:.0f} | {r['peak']:.0f} | {r['added']:.0f} "
                  f"| {r['after']:.0f} | {r['threads']} | {r['seconds']:.1f} | {r['statuses']} |", flush=True)


if __name__ == "__main__":
    main()
