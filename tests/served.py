"""Helpers for the dashboard tests: a state folder after cycles, the app on loopback.

``served(state)`` runs ``planner serve``'s app with uvicorn in a thread on a free
127.0.0.1 port and stops it on exit; ``get`` and ``raw`` fetch from it (``raw`` sends the
request line byte for byte, so ``..`` and ``%2F`` reach the server as typed).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from planner.config import load_model
from planner.cycle import run_cycle
from planner.run import SAMPLE

SAMPLE_DAYS = ("2026-11-14", "2026-11-15", "2026-11-16")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]


def sample_state(root: Path, scenario: Path = SAMPLE, days: tuple[str, ...] = SAMPLE_DAYS,
                 targets: tuple[str, ...] = ("slurm", "kueue", "json")) -> tuple[Path, Path]:
    """A copy of ``scenario`` and a state folder after one cycle per day in ``days``."""
    folder = root / "scenario"
    shutil.copytree(scenario, folder)
    state = root / "state"
    model = load_model("default")
    for day in days:
        run_cycle(folder, state, model, as_of=day, targets=list(targets))
    return folder, state


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(state: Path, root_path: str = "") -> Iterator[str]:
    """The dashboard over ``state`` on loopback; yields its base URL."""
    import uvicorn

    from planner.serve.app import create_app

    port = free_port()
    app = create_app(state)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                            root_path=root_path, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def raw(base: str, target: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """Send ``METHOD target HTTP/1.1`` with ``target`` exactly as given."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest(method, target, skip_host=False, skip_accept_encoding=True)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, \
            response.read()
    finally:
        conn.close()


def get(base: str, path: str) -> tuple[int, str]:
    """GET ``path`` (already percent-encoded); status and text."""
    status, _, body = raw(base, path)
    return status, body.decode("utf-8")


def get_json(base: str, path: str) -> Any:
    status, text = get(base, path)
    assert status == 200, (path, status, text[:500])
    return json.loads(text)
