"""Headless Chromium through the DevTools protocol: open a page, wait until it shows a
text (a bokeh page draws after its websocket delivers the document, which plain
``chromium --screenshot`` does not wait for), then return its text and a PNG."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# the page's text, shadow roots included (bokeh 3 draws its models inside them)
TEXT = """(function text(node) {
  let out = node.shadowRoot ? text(node.shadowRoot) : "";
  for (const child of node.childNodes) {
    out += child.nodeType === 3 ? child.textContent + " " : text(child);
  }
  return out;
})(document.body || document)"""


async def _session(debugger_url, url, wait_text, timeout, width, height):
    from tornado.websocket import websocket_connect

    socket = await websocket_connect(debugger_url, max_message_size=64 << 20)
    ids = itertools.count(1)

    async def call(method, **params):
        request = next(ids)
        await socket.write_message(json.dumps({"id": request, "method": method,
                                               "params": params}))
        while True:
            reply = json.loads(await socket.read_message())
            if reply.get("id") == request:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    await call("Emulation.setDeviceMetricsOverride", width=width, height=height,
               deviceScaleFactor=1, mobile=False)
    await call("Page.navigate", url=url)
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        result = await call("Runtime.evaluate", returnByValue=True, expression=TEXT)
        text = result["result"].get("value") or ""
        if all(t in text for t in wait_text):
            break
        await asyncio.sleep(0.25)
    else:
        raise TimeoutError(f"{url} did not show {wait_text!r} in {timeout} s; it showed "
                           f"{text[:300]!r}")
    await asyncio.sleep(1.0)  # let the canvases finish drawing
    shot = await call("Page.captureScreenshot", format="png")
    socket.close()
    return text, base64.b64decode(shot["data"])


def render(url, wait_text, *, timeout=30.0, width=1400, height=1100):
    """(visible text, PNG bytes) of ``url`` once its text contains every string of
    ``wait_text`` (one string or a tuple)."""
    wait_text = (wait_text,) if isinstance(wait_text, str) else tuple(wait_text)
    profile = tempfile.mkdtemp(prefix="hetgraph-chromium-")
    process = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(t for t in targets if t["type"] == "page")
        return asyncio.run(_session(page["webSocketDebuggerUrl"], url, wait_text, timeout,
                                    width, height))
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(profile, ignore_errors=True)
