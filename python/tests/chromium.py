"""Headless Chromium over the DevTools protocol (a pipe, no network port): open local pages,
collect console errors, uncaught exceptions, failed loads and any request that leaves the
machine, evaluate checks in the page and save full-page screenshots.

Usage as a script: python3 chromium.py PAGE.html OUT.png [WIDTH [ELEMENT_ID | ..ELEMENT_ID]]
(an element alone, or with "..ID" the page from its top down to that element)
"""

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
]


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with one page, driven through --remote-debugging-pipe."""

    def __init__(self, width=1400, height=900, timeout=60.0, attempts=2):
        exe = find_chromium()
        if not exe:
            raise RuntimeError("chromium is not installed (Debian package `chromium`, see scripts/deps.sh)")
        self.timeout = timeout
        # A browser that starts but never answers on the pipe (seen on a loaded 2-core machine,
        # the first DevTools call timing out) is launched again once with a fresh profile; the
        # error of the last attempt carries the tail of its log.
        for attempt in range(attempts):
            self._launch(exe)
            try:
                self._attach(width, height)
                return
            except TimeoutError as e:
                log = self._log_tail()
                self.close()
                if attempt + 1 == attempts:
                    raise TimeoutError("%s (after %d launches); its log ends: %s" % (e, attempts, log)) from None
            except BaseException:
                self.close()
                raise

    def _launch(self, exe):
        self.profile = tempfile.mkdtemp(prefix="probelab_chromium_")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire():
            # Fresh copies first: a pipe end may already be fd 3 or 4 (dup2 onto itself would
            # keep its close-on-exec flag).
            r, w = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        # Its log goes to a file: a pipe nobody reads would fill and stall the browser.
        self._log = open(os.path.join(self.profile, "stderr.log"), "w+b")
        self.proc = subprocess.Popen(
            [exe] + FLAGS + ["--user-data-dir=" + self.profile, "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            preexec_fn=wire, close_fds=False,
            # Without a sanitizer runtime the tests may preload (the sanitizer build's pytest runs).
            env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._id = 0
        self.events = []

    def _log_tail(self):
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def _attach(self, width, height):
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _read_message(self, deadline):
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe: " + self._log_tail())
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, session=False, **params):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method):
        deadline = time.monotonic() + self.timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method:
                return m
            self.events.append(m)

    def open(self, path):
        """Loads a local file; returns the problems seen while loading: console errors,
        uncaught exceptions, log errors and requests for anything but file: and data: URLs."""
        self.events = []
        url = "file://" + os.path.abspath(path)
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")
        self.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))")
        problems = []
        for e in self.events:
            method, p = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                problems.append("exception: %s %s" % (d.get("text"), d.get("exception", {}).get("description", "")))
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                problems.append("console.%s: %s" % (p["type"], " ".join(str(a.get("value", a.get("description")))
                                                                         for a in p.get("args", []))))
            elif method == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                problems.append("log %s: %s" % (p["entry"]["level"], p["entry"].get("text")))
            elif method == "Network.requestWillBeSent":
                u = p.get("request", {}).get("url", "")
                if not (u.startswith("file:") or u.startswith("data:") or u == "about:blank"):
                    problems.append("network request: " + u)
            elif method == "Network.loadingFailed":
                problems.append("load failed: %s" % p.get("errorText"))
        return problems

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("evaluate failed: %s" % r["exceptionDetails"])
        return r.get("result", {}).get("value")

    def screenshot(self, out_png, max_height=3000, until=None):
        """The page from its top: at most max_height CSS pixels, or down to the bottom of the
        element with id `until`."""
        m = self.call("Page.getLayoutMetrics", session=True)
        size = m.get("cssContentSize") or m["contentSize"]
        height = min(size["height"], max_height)
        if until:
            height = self.evaluate("document.getElementById(%s).getBoundingClientRect().bottom + scrollY + 8"
                                   % json.dumps(until))
        clip = {"x": 0, "y": 0, "width": size["width"], "height": height, "scale": 1}
        r = self.call("Page.captureScreenshot", session=True, format="png", clip=clip, captureBeyondViewport=True)
        with open(out_png, "wb") as f:
            f.write(base64.b64decode(r["data"]))
        return out_png

    def element_screenshot(self, element_id, out_png):
        """A screenshot of one element (e.g. a report section), by id."""
        rect = self.evaluate("(() => { const r = document.getElementById(%s).getBoundingClientRect();"
                             " return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; })()"
                             % json.dumps(element_id))
        rect["scale"] = 1
        r = self.call("Page.captureScreenshot", session=True, format="png", clip=rect, captureBeyondViewport=True)
        with open(out_png, "wb") as f:
            f.write(base64.b64decode(r["data"]))
        return out_png

    def close(self):
        self.timeout = min(self.timeout, 5.0)  # a browser that does not answer is killed below
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == "__main__":
    page, out = sys.argv[1], sys.argv[2]
    width = int(sys.argv[3]) if len(sys.argv) > 3 else 1400
    with Browser(width=width) as b:
        problems = b.open(page)
        if len(sys.argv) > 4 and sys.argv[4].startswith(".."):
            b.screenshot(out, until=sys.argv[4][2:])
        elif len(sys.argv) > 4:
            b.element_screenshot(sys.argv[4], out)
        else:
            b.screenshot(out)
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)
