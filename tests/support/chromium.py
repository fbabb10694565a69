"""Headless Chromium (Debian's `chromium`, which .ci/run installs) driven over the DevTools
protocol: open a local file, collect what its page logs as an error or throws, read facts
from its DOM, take a screenshot. Flags as this machine needs them: no sandbox (root), no GPU,
no network of its own (background networking, component updates, sync and QUIC off) and a
fresh profile, so nothing reaches beyond 127.0.0.1.

The websocket client is aiohttp's (a gate dependency): no browser-automation package.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0"]
START_TIMEOUT_S = 60


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Page:
    screenshot: bytes
    facts: Any
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions


def open_page(path: Path, *, facts_js: str, width: int = 1000, height: int = 1400) -> Page:
    """Load `path` in a fresh headless Chromium; `facts_js` (an expression) is evaluated in
    the page once it has loaded, and its JSON value returned with the screenshot."""
    exe = chromium_path()
    if exe is None:
        raise AssertionError("chromium is not installed: .ci/run installs it "
                             "(apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="gate-chromium-") as profile:
        # Its own process group: Chromium's renderer and utility processes outlive the
        # browser process by a moment and keep writing into the profile, so the profile is
        # removed only once the whole group is gone.
        proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}",
                                 f"--window-size={width},{height}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            port = _devtools_port(Path(profile), proc)
            return asyncio.run(_drive(port, path.resolve().as_uri(), facts_js, width, height))
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the browser's process group, SIGKILL to what is left after 20 s, and
    return only when no live process of the group remains (zombies that no init reaps
    write nothing, so they do not count)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        if _group_stopped(proc, timeout_s=20):
            break
    proc.wait()


def _group_stopped(proc: subprocess.Popen, *, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        proc.poll()  # reaps the leader, which is ours
        if not _live_members(proc.pid):
            return True
        time.sleep(0.05)
    return False


def _live_members(pgid: int) -> list[int]:
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited while listed
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        state, _ppid, pgrp = text[text.rindex(")") + 2:].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            live.append(int(stat.parent.name))
    return live


def _devtools_port(profile: Path, proc: subprocess.Popen) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise AssertionError(f"chromium exited with {proc.returncode}: {err[-2000:]}")
        if marker.is_file() and marker.read_text().strip():
            return int(marker.read_text().split()[0])
        time.sleep(0.1)
    raise AssertionError(f"chromium opened no DevTools port within {START_TIMEOUT_S} s")


async def _drive(port: int, url: str, facts_js: str, width: int, height: int) -> Page:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json()
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        async with http.ws_connect(ws_url, max_msg_size=0) as ws:
            cdp = _Session(ws)
            for domain in ("Page", "Runtime", "Log"):
                await cdp.call(f"{domain}.enable")
            await cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                           deviceScaleFactor=1, mobile=False)
            await cdp.call("Page.navigate", url=url)
            await cdp.wait_for("Page.loadEventFired")
            await asyncio.sleep(0.3)  # let the page's own script run after load
            value = await cdp.call("Runtime.evaluate", expression=f"JSON.stringify({facts_js})",
                                   returnByValue=True)
            shot = await cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            return Page(base64.b64decode(shot["data"]), json.loads(value["result"]["value"]),
                        cdp.errors)


class _Session:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws, self.next_id = ws, 0
        self.errors: list[str] = []
        self.events: list[str] = []

    def _note(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method:
            self.events.append(method)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                        for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(details.get("exception", {}).get("description")
                               or details.get("text", "exception"))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(params["entry"].get("text", ""))

    async def call(self, method: str, **params: Any) -> dict:
        self.next_id += 1
        wanted = self.next_id
        await self.ws.send_json({"id": wanted, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(self.ws.receive_json(), timeout=60)
            if msg.get("id") == wanted:
                if "error" in msg:
                    raise AssertionError(f"DevTools {method}: {msg['error']}")
                return msg.get("result", {})
            self._note(msg)

    async def wait_for(self, event: str) -> None:
        while event not in self.events:
            self._note(await asyncio.wait_for(self.ws.receive_json(), timeout=60))
