"""The docs site as a reader sees it: `mkdocs build --strict` with Material for MkDocs (the
[docs] extra), every link and image of the built site resolved, and the key pages rendered in
a real headless Chromium (Debian's `chromium` package), driven over the DevTools protocol on a
pipe: no page, script, style sheet, font or image may fail to load, no script may throw, and
every formula must be typeset by the vendored KaTeX. Screenshots of the home page and of
Theorem 4.1 are kept in $EXACTMEM_ARTIFACTS (or the test's temporary folder, printed).

Skipped where Material for MkDocs or Chromium is not installed; CI installs both (.ci/run)."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent

# the pages a reader meets first; each must typeset maths where it has any
KEY_PAGES = ("index.html", "quickstart.html", "theorem-4-1.html", "trust.html")
MATHS_PAGES = ("index.html", "quickstart.html", "theorem-4-1.html")
SCREENSHOTS = {"index.html": "home.png", "theorem-4-1.html": "theorem-4-1.png"}


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


needs_material = pytest.mark.skipif(
    importlib.util.find_spec("material") is None or importlib.util.find_spec("mkdocs") is None,
    reason="Material for MkDocs is not installed (pip install '.[docs]')",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


# --------------------------------------------------------------------------- the built files


class _Links(HTMLParser):
    """The ids of a page and the targets of its links, images, scripts and style sheets."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.targets: list[tuple[str, str]] = []  # (tag, url)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if named.get("id"):
            self.ids.add(named["id"] or "")
        for attribute in ("href", "src"):
            url = named.get(attribute)
            if url and tag in ("a", "img", "script", "link", "source"):
                self.targets.append((tag, url))


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def site_link_errors(site: Path) -> list[str]:
    """Every local link, image, script and style sheet of every page names a file of the site,
    and a link's #fragment an id of its page."""
    # 404.html is served at the site's root by a web server, its links absolute from there
    pages = {p: _parse(p) for p in site.rglob("*.html") if p.name != "404.html"}
    errors = []
    for page, parsed in pages.items():
        for tag, url in parsed.targets:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:")):
                continue  # an external link: not followed (the machine may be offline)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(site)}: <{tag}> {url}"
            if not target.is_file():
                errors.append(f"{where}: no such file")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    errors.append(f"{where}: no id {parts.fragment!r}")
    return errors


@needs_material
def test_the_site_has_a_home_page_and_no_broken_link(site):
    assert (site / "index.html").is_file()
    for page in KEY_PAGES:
        assert (site / page).is_file(), page
    assert site_link_errors(site) == []


@needs_material
def test_the_link_check_sees_a_missing_file_and_a_missing_anchor(site, tmp_path):
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    (copy / "trust.html").unlink()
    page = copy / "index.html"
    page.write_text(page.read_text() + '<a href="quickstart.html#no-such-heading">x</a>')
    errors = "\n".join(site_link_errors(copy))
    assert "index.html: <a> trust.html: no such file" in errors
    assert "no id 'no-such-heading'" in errors


def test_the_navigation_is_a_handful_of_sections():
    yaml = pytest.importorskip("yaml")  # mkdocs' own dependency

    class _Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may hold !!python/name tags (none today); unknown tags read as None
    _Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]
    assert 4 <= len(nav) <= 8
    assert nav[0] == {"Home": "index.md"}
    docs = ROOT / "docs"
    # the example files (docs/examples) are data, not pages
    pages = {
        p.relative_to(docs).as_posix()
        for p in docs.rglob("*.md")
        if not p.relative_to(docs).as_posix().startswith("examples/")
    }

    def listed(items):
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from listed(value) if isinstance(value, list) else [value]

    # every page is reachable from the navigation
    assert pages - set(listed(nav)) == set()


# --------------------------------------------------------------------------- self-contained


def test_every_python_example_defines_its_temporary_folder():
    """A reader pastes the examples of a page in order: `tmp` is defined before it is used."""
    block = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
    for page in sorted((ROOT / "docs").rglob("*.md")):
        code = "\n".join(block.findall(page.read_text()))
        first = re.search(r"\btmp\b", code)
        if first:
            line = code[code.rfind("\n", 0, first.start()) + 1 : code.find("\n", first.start())]
            assert re.match(r"(>>> )?tmp = ", line), f"{page.name}: `tmp` used before: {line}"


# --------------------------------------------------------------------------- the browser


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
    it reads commands on fd 3 and writes answers and events on fd 4, each a JSON text ended by
    a NUL byte). No driver package and no network port are needed."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        flags = [
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        self._process = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', executable]
            + flags,
            pass_fds=(to_chrome_r, from_chrome_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Network", "Runtime", "Log", "DOM", "CSS"):
            self.send(f"{domain}.enable", session=True)
        self.resize(1280, 900)  # a desktop window: the navigation tabs show from 1220 px

    def resize(self, width: int, height: int) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, event: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            self.events.append(self._read(deadline))

    def open(self, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.send(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True
        )
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def fonts_for(self, selector: str) -> dict[str, int]:
        """The fonts the browser drew an element's text with: family -> glyphs drawn."""
        root = self.send("DOM.getDocument", session=True)["root"]["nodeId"]
        node = self.send("DOM.querySelector", session=True, nodeId=root, selector=selector)
        fonts = self.send("CSS.getPlatformFontsForNode", session=True, nodeId=node["nodeId"])
        return {f["familyName"]: f["glyphCount"] for f in fonts["fonts"]}

    def screenshot(self, path: Path, width: int = 1280, max_height: int = 2400) -> None:
        height = min(max_height, int(self.evaluate("document.documentElement.scrollHeight")))
        self.resize(width, height)
        time.sleep(0.5)  # the theme's transitions (tabs fading in) settle
        data = self.send("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        self.resize(width, 900)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


# what a page shows a reader, read in the page: every formula, broken images, raw TeX left in
# the text (outside code), and the headline
PAGE_STATE = r"""(() => {
  const maths = [...document.querySelectorAll(".arithmatex")];
  const raw = [];
  const walker = document.createTreeWalker(document.querySelector("article") || document.body,
                                           NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest("pre, code, .katex, script, style")) continue;
    const m = node.textContent.match(/\\\(|\\\[|\$\$|\\(mathbb|frac|sqrt|tilde|cdot|le|ge)\b/);
    if (m) raw.push(node.textContent.trim().slice(0, 80));
  }
  return {
    title: document.title,
    h1: (document.querySelector("article h1") || {}).textContent || null,
    maths: maths.length,
    typeset: maths.filter(e => e.querySelector(".katex")).length,
    errors: [...document.querySelectorAll(".katex-error")].map(e => e.textContent.slice(0, 80)),
    raw: raw,
    brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                                      .map(i => i.getAttribute("src")),
    fontsReady: document.fonts.status,
  };
})()"""


# a line of the checks' output in a code block of the page, as `verify` prints it
PHI_TILDE_PROBE = r"""(() => {
  const code = document.createElement("code");
  code.id = "phi-tilde-probe";
  code.textContent = "sums of \u03c6\u0303 pairwise";
  document.querySelector("article pre").appendChild(code);
  return document.fonts.ready.then(() => true);
})()"""


def phi_tilde_fonts(browser: Browser) -> dict[str, int]:
    """φ̃ (φ + U+0303) in a code block: the fonts of its line. The site's code-marks font draws
    the pair as one glyph with the tilde over φ (docs/assets/extra.css); a monospace font with
    no anchor for the mark draws the tilde over the next character."""
    browser.evaluate(PHI_TILDE_PROBE)
    return browser.fonts_for("#phi-tilde-probe")


def artifacts_folder(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EXACTMEM_ARTIFACTS") or tmp_path) / "docsite"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def failed_loads(events: list[dict]) -> list[str]:
    urls = {
        e["params"]["requestId"]: e["params"]["request"]["url"]
        for e in events
        if e.get("method") == "Network.requestWillBeSent"
    }
    failed = [
        f"{urls.get(e['params']['requestId'], '?')}: {e['params'].get('errorText')}"
        for e in events
        if e.get("method") == "Network.loadingFailed"
    ]
    failed += [
        f"{e['params']['response']['url']}: HTTP {e['params']['response']['status']}"
        for e in events
        if e.get("method") == "Network.responseReceived"
        and e["params"]["response"].get("status", 200) >= 400
    ]
    return failed


def script_errors(events: list[dict]) -> list[str]:
    errors = [
        json.dumps(e["params"]["exceptionDetails"])[:300]
        for e in events
        if e.get("method") == "Runtime.exceptionThrown"
    ]
    errors += [
        e["params"]["entry"]["text"][:300]
        for e in events
        if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"
    ]
    return errors


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    executable = chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    session = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    yield session
    session.close()


@needs_material
def test_the_key_pages_render_in_a_browser_with_their_maths_typeset(site, browser, tmp_path):
    artifacts = artifacts_folder(tmp_path)
    for page in KEY_PAGES:
        browser.open((site / page).as_uri())
        # fonts (KaTeX's among them) load after the load event; wait for them before judging
        browser.evaluate("document.fonts.ready.then(() => true)")
        state = browser.evaluate(PAGE_STATE)
        assert state["h1"], f"{page}: no heading: {state}"
        assert failed_loads(browser.events) == [], page
        assert script_errors(browser.events) == [], page
        assert state["brokenImages"] == [], page
        assert state["errors"] == [], f"{page}: KaTeX could not typeset {state['errors']}"
        assert state["typeset"] == state["maths"], f"{page}: untypeset maths"
        assert state["raw"] == [], f"{page}: TeX left in the text: {state['raw']}"
        if page in MATHS_PAGES:
            assert state["maths"] > 0, f"{page}: no formula found (is arithmatex on?)"
        if page == "theorem-4-1.html":
            assert phi_tilde_fonts(browser).get("exactmem code marks") == 1
        if page in SCREENSHOTS:
            browser.screenshot(artifacts / SCREENSHOTS[page])
            assert (artifacts / SCREENSHOTS[page]).stat().st_size > 10_000
    print(f"screenshots in {artifacts}")


@needs_material
def test_the_browser_check_sees_untypeset_maths_and_a_missing_image(site, browser, tmp_path):
    """The checks above can fail: a page whose KaTeX is missing and whose image is gone."""
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    (copy / "assets" / "katex" / "katex.min.js").unlink()
    (copy / "assets" / "fonts" / "code-marks.woff").unlink()
    page = copy / "theorem-4-1.html"
    page.write_text(
        page.read_text().replace("</article>", '<img src="images/missing.png"></article>', 1)
    )
    browser.open(page.as_uri())
    state = browser.evaluate(PAGE_STATE)
    assert state["maths"] > 0 and state["typeset"] == 0
    assert state["raw"], "the raw TeX is seen"
    assert state["brokenImages"] == ["images/missing.png"]
    missing = failed_loads(browser.events)
    assert any("katex.min.js" in m for m in missing) and any("missing.png" in m for m in missing)
    assert any("katex is not defined" in e for e in script_errors(browser.events))
    assert "exactmem code marks" not in phi_tilde_fonts(browser)


# --------------------------------------------------------------------------- console blocks


def _docs_conftest():
    import importlib.util as util

    spec = util.spec_from_file_location("docs_conftest", ROOT / "docs" / "conftest.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_console_block_is_commands_and_their_output():
    pytest.importorskip("sybil")
    commands = _docs_conftest().console_commands(
        "$ exactmem --version\nexactmem ...\n$ echo a \\\n  b\na b\n$ true\n"
    )
    assert commands == [
        ("exactmem --version", "exactmem ...\n"),
        ("echo a \\\n  b", "a b\n"),
        ("true", "\n"),
    ]
    with pytest.raises(ValueError, match="must start with a `\\$ ` line"):
        _docs_conftest().console_commands("output before any command\n$ true\n")


def test_a_console_block_fails_on_other_output_and_on_a_failing_command(tmp_path):
    pytest.importorskip("sybil")
    conftest = _docs_conftest()

    namespace = {"tmp": tmp_path, "console_tmp": tmp_path}  # one page: one namespace

    class Example:
        def __init__(self, parsed: str) -> None:
            self.parsed = parsed
            self.namespace = namespace

    assert conftest.evaluate_console(Example("$ exactmem --version\nexactmem ...\n")) is None
    assert conftest.evaluate_console(Example("$ echo 12 points > f; cat f\n12 points\n")) is None
    wrong = conftest.evaluate_console(Example("$ echo 12 points\n13 points\n"))
    assert wrong and "expected:\n13 points" in wrong and "got:\n12 points" in wrong
    failed = conftest.evaluate_console(Example("$ exactmem verify missing.json --data x.json\n"))
    assert failed and "exited with 2" in failed and "error:" in failed
