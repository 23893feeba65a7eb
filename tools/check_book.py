"""Browser check of the built book: what a reader would see, in headless Chromium.

Serves the built HTML (``_build/html``) on 127.0.0.1, opens every page in Debian's
Chromium (driven by Playwright, never ``playwright install``) at 1,400 px, waits for
the load, images and MathJax, saves a full-page screenshot and fails on problems a
reader would see::

    python tools/check_book.py [--html _build/html] [--out _build/check] [--width 1400]
                               [--allow CATEGORY ...] [--page GLOB ...]

Writes ``OUT/report.json`` and ``OUT/screens/*.png`` and prints per-category counts and
each problem with its page and a snippet. Exit status: 0 clean (or only allowed
categories), 1 problems found, 2 the check could not run.

The detection is a set of small pure functions (HTML, text or measurements in, a list
of ``Problem`` out) that ``tests/test_check_book.py`` tests without a browser; the
browser part only renders, measures and records requests.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import http.server
import json
import os
import posixpath
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

# Category -> what it means; the order is the order of the summary.
CATEGORIES: dict[str, str] = {
    "traceback": "Python traceback or `...Error:` line in a cell output",
    "warning": "warning text in a cell output (RuntimeWarning, UserWarning, Warning: ...)",
    "progress": "progress-bar text in a cell output (tqdm: 42%|, it/s], s/it])",
    "local_path": "local path in the page (/root/, /home/, /tmp/, /work/, site-packages)",
    "broken_link": "link to a page or file of the book that does not exist",
    "broken_anchor": "link whose #fragment matches no element id on the target page",
    "image_unreadable": "image rendered at less than --min-scale of its natural width",
    "image_overflow": "image wider than the content column",
    "image_broken": "image that did not load",
    "alt_text": "image with empty or file-name-like alt text",
    "table_overflow": "table running past the content column without a scroll box",
    "table_scroll": "table wider than the column, cut at its edge in a horizontal scroll box",
    "raw_tex": "unrendered TeX (\\( \\) \\[ $$) in visible text",
    "external_request": "request leaving 127.0.0.1 (the book must work offline)",
    "missing_resource": "local request answered 4xx/5xx or failed",
    "js_error": "uncaught JavaScript error on the page",
}
# Reported and counted, but only fail the check with --fail-on: a wide table that scrolls
# is acceptable (issue 11: "wide tables scroll or are split"). A JavaScript error fails: the
# one every page logged (THEBE_JS_URL declared twice) is gone (tools/book_scripts.py).
WARN_BY_DEFAULT = frozenset({"table_scroll"})

SKIP_DIRS = ("_static", "_sources", "_images", "_downloads")
SKIP_PAGES = ("genindex.html", "search.html", "py-modindex.html")
SNIPPET_CHARS = 160
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@dataclass
class Problem:
    category: str
    page: str
    snippet: str
    where: str = ""
    detail: dict = field(default_factory=dict)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """One line, whitespace collapsed, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------------------
# HTML helpers
# --------------------------------------------------------------------------------------


def parse(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def main_content(soup: BeautifulSoup):
    """The article column of a Sphinx/Jupyter Book page (the whole body as a fallback)."""
    for selector in ("article.bd-article", "article", "[role=main]", "main", "body"):
        node = soup.select_one(selector)
        if node is not None:
            return node
    return soup


def output_blocks(html: str) -> list[tuple[str, str]]:
    """``(where, text)`` for every cell output in the article, e.g. ``("output 3", ...)``.

    MyST-NB renders each code cell's outputs in ``div.cell_output``; the number is the
    output's position on the page (1-based), to find it on the screenshot.
    """
    soup = parse(html)
    blocks = []
    for i, node in enumerate(main_content(soup).select("div.cell_output"), start=1):
        for junk in node.select("script, style"):
            junk.decompose()
        blocks.append((f"output {i}", node.get_text()))
    return blocks


def text_outside_outputs(html: str) -> str:
    """Prose of the article: no cell outputs and no code cells (a path in code is code)."""
    soup = parse(html)
    article = main_content(soup)
    for junk in article.select(
        "div.cell_output, div.cell_input, script, style, template, noscript"
    ):
        junk.decompose()
    return article.get_text()


def _lines(text: str) -> list[str]:
    return [line for line in re.split(r"[\r\n]+", text) if line.strip()]


# --------------------------------------------------------------------------------------
# Pure checks: text and HTML
# --------------------------------------------------------------------------------------

TRACEBACK_RE = re.compile(r"Traceback \(most recent call last\)")
ERROR_LINE_RE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*)?(?:Error|Exception):(?:\s|$)")
WARNING_RE = re.compile(
    r"\b\w*Warning:"
    r"|\b(?:Runtime|User|Future|Deprecation|PendingDeprecation|Resource|Syntax|Convergence)"
    r"Warning\b"
    r"|^\s*WARNING\b"
    r"|\bwarnings\.warn\("
)
PROGRESS_RE = re.compile(
    r"\d+%\|"  # 42%|█████
    r"|\d[a-zA-Z]*/s\]|\ds/[a-zA-Z]+\]|\?[a-zA-Z]+/s\]"  # 3.2it/s] 1.2s/it] ?it/s] 5.1text/s]
    r"|\|[█▏▎▍▌▋▊▉#]{2,}"  # the bar itself
    r"|\d+/\d+ \[\d+:\d+<"  # 3/10 [00:01<00:02
)
LOCAL_PATH_RE = re.compile(
    r"(?:/root/|/home/|/tmp/|/work/|/Users/|site-packages|dist-packages|[A-Z]:\\Users\\)"
)
RAW_TEX_RE = re.compile(
    r"\\\(.{0,200}?\\\)|\\\[.{0,400}?\\\]|\$\$.{0,400}?\$\$|\\begin\{\w+\*?\}|\\\(|\$\$",
    re.S,
)


def check_output_text(page: str, where: str, text: str) -> list[Problem]:
    """Tracebacks, ``Error:`` lines, warnings, progress bars and local paths in one output."""
    problems: list[Problem] = []
    lines = _lines(text)
    if TRACEBACK_RE.search(text):
        error_lines = [line for line in lines if ERROR_LINE_RE.match(line)]
        last = error_lines[-1] if error_lines else ""
        for _ in TRACEBACK_RE.finditer(text):
            problems.append(
                Problem(
                    "traceback", page, snippet(f"Traceback (most recent call last) … {last}"), where
                )
            )
    else:
        for line in lines:
            if ERROR_LINE_RE.match(line):
                problems.append(Problem("traceback", page, snippet(line), where))
    for line in lines:
        if WARNING_RE.search(line):
            problems.append(Problem("warning", page, snippet(line), where))
        if PROGRESS_RE.search(line):
            problems.append(Problem("progress", page, snippet(line), where))
    problems += check_local_paths(page, where, text)
    return problems


def check_local_paths(page: str, where: str, text: str) -> list[Problem]:
    """One problem per line that shows a local file-system path."""
    return [
        Problem("local_path", page, snippet(line), where)
        for line in _lines(text)
        if LOCAL_PATH_RE.search(line)
    ]


def check_outputs(page: str, html: str) -> list[Problem]:
    """All output checks on a page, plus local paths in its prose."""
    problems: list[Problem] = []
    for where, text in output_blocks(html):
        problems += check_output_text(page, where, text)
    problems += check_local_paths(page, "text", text_outside_outputs(html))
    return problems


def visible_text_for_tex(html: str) -> str:
    """Article text that MathJax should have typeset: no code, outputs' <pre> or MathJax."""
    soup = parse(html)
    article = main_content(soup)
    for junk in article.select(
        "pre, code, script, style, textarea, template, noscript, mjx-container, "
        "mjx-assistive-mml, .cell_input, .MathJax, .MathJax_Preview"
    ):
        junk.decompose()
    return article.get_text(" ")


def check_raw_tex(page: str, html: str) -> list[Problem]:
    """TeX left as text: ``\\(R^2\\)``, ``$$ ... $$``, ``\\[ ... \\]``, ``\\begin{...}``."""
    text = visible_text_for_tex(html)
    return [
        Problem("raw_tex", page, snippet(m.group(0)), "text") for m in RAW_TEX_RE.finditer(text)
    ]


IMAGE_NAME_RE = re.compile(r"\.(?:png|jpe?g|gif|svg|webp)$|(?:^|/)_images/", re.I)


def check_alt_text(page: str, html: str) -> list[Problem]:
    """Images in the article whose alt text is missing, empty or a file name/path."""
    problems = []
    for img in main_content(parse(html)).find_all("img"):
        alt = (img.get("alt") or "").strip()
        src = img.get("src") or ""
        if not alt:
            problems.append(Problem("alt_text", page, snippet(f"no alt text: {src}"), "image"))
        elif IMAGE_NAME_RE.search(alt):
            problems.append(
                Problem("alt_text", page, snippet(f"alt is a file name: {alt}"), "image")
            )
    return problems


REFRESH_RE = re.compile(r"^\s*\d+\s*;\s*url\s*=\s*['\"]?([^'\"]+)", re.I)


def meta_refresh_target(html: str) -> str | None:
    """The URL of a ``<meta http-equiv="refresh">`` redirect page (Jupyter Book's index)."""
    for meta in parse(html).find_all("meta"):
        if (meta.get("http-equiv") or "").lower() == "refresh":
            match = REFRESH_RE.match(meta.get("content") or "")
            if match:
                return match.group(1).strip()
    return None


def check_redirect(page: str, html: str, files: set[str]) -> tuple[str | None, list[Problem]]:
    """``(target, problems)`` for a meta-refresh page: its target must exist in the book."""
    href = meta_refresh_target(html)
    if href is None:
        return None, []
    return href, check_links(page, [href], files, {})


def collect_ids(html: str) -> set[str]:
    """Every fragment a link can target on a page: element ids and ``<a name>``."""
    soup = parse(html)
    ids = {tag["id"] for tag in soup.find_all(id=True)}
    ids |= {tag["name"] for tag in soup.find_all("a", attrs={"name": True})}
    return ids


def collect_hrefs(html: str) -> list[str]:
    return [a["href"] for a in parse(html).find_all("a", href=True)]


def resolve_href(page: str, href: str) -> tuple[str, str] | None:
    """``(target path relative to the book root, fragment)``, or None for external links.

    ``page`` is the linking page's path relative to the root (``book/intro.html``).
    A target that leaves the root resolves to a path starting with ``../``.
    """
    href = href.strip()
    if not href:
        return None
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith("//"):
        return None  # http(s):, mailto:, javascript:, data: ... not a page of the book
    path, fragment = unquote(parts.path), unquote(parts.fragment)
    if not path:
        return page, fragment
    if path.startswith("/"):
        target = posixpath.normpath(path).lstrip("/") or "."
    else:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page), path))
    if path.endswith("/") or target == ".":
        target = "index.html" if target == "." else posixpath.join(target, "index.html")
    return target, fragment


def check_links(
    page: str, hrefs: list[str], files: set[str], ids: dict[str, set[str]]
) -> list[Problem]:
    """Internal links: the target file must exist; a fragment must match an id on it.

    ``files``: every file of the built site (relative paths); ``ids``: the ids of each
    page that was rendered. Fragments on pages not rendered (genindex) are not checked.
    """
    problems = []
    seen = set()
    for href in hrefs:
        resolved = resolve_href(page, href)
        if resolved is None or href in seen:
            continue
        seen.add(href)
        target, fragment = resolved
        if target == ".." or target.startswith("../") or target not in files:
            problems.append(Problem("broken_link", page, snippet(f"{href} -> {target}"), "link"))
        elif fragment and target in ids and fragment not in ids[target]:
            problems.append(
                Problem(
                    "broken_anchor",
                    page,
                    snippet(f"{href} (no id {fragment!r} on {target})"),
                    "link",
                )
            )
    return problems


# --------------------------------------------------------------------------------------
# Pure checks: measurements taken in the browser
# --------------------------------------------------------------------------------------


def check_images(page: str, images: list[dict], min_scale: float = 0.4) -> list[Problem]:
    """Images from the browser: ``src``, ``natural_width``, ``width`` (rendered, CSS px),
    ``column_width`` (content column), ``overflow`` (px past the column's right edge)."""
    problems = []
    for img in images:
        name = posixpath.basename(urlsplit(img.get("src", "")).path) or img.get("src", "")
        natural = img.get("natural_width") or 0
        width = img.get("width") or 0
        column = img.get("column_width") or 0
        detail = {k: img.get(k) for k in ("src", "natural_width", "width", "column_width", "top")}
        where = "image" if img.get("top") is None else f"image at y={img['top']} px"
        if natural == 0:
            problems.append(
                Problem("image_broken", page, snippet(f"not loaded: {name}"), where, detail)
            )
            continue
        if width == 0:
            continue  # not displayed (hidden cell or collapsed block)
        scale = width / natural
        if scale < min_scale:
            problems.append(
                Problem(
                    "image_unreadable",
                    page,
                    snippet(
                        f"{name}: {natural} px shown at {width:.0f} px ({scale:.0%} < "
                        f"{min_scale:.0%})"
                    ),
                    where,
                    detail,
                )
            )
        overflow = img.get("overflow") or 0
        if overflow > 1 or (column and width > column + 1):
            problems.append(
                Problem(
                    "image_overflow",
                    page,
                    snippet(f"{name}: {width:.0f} px wide in a {column:.0f} px column"),
                    where,
                    detail,
                )
            )
    return problems


def check_tables(page: str, tables: list[dict]) -> list[Problem]:
    """Tables from the browser: ``overflow`` (px past the column's right edge, the table's
    or its scroll box's) and ``hidden`` (px of the table cut off inside its scroll box)."""
    problems = []
    for t in tables:
        head = t.get("text", "")
        where = "table" if t.get("top") is None else f"table at y={t['top']} px"
        if (t.get("overflow") or 0) > 1:
            problems.append(
                Problem(
                    "table_overflow",
                    page,
                    snippet(f"{t['overflow']:.0f} px past the column: {head}"),
                    where,
                    t,
                )
            )
        elif (t.get("hidden") or 0) > 4:  # a few px are borders and rounding
            problems.append(
                Problem(
                    "table_scroll",
                    page,
                    snippet(
                        f"{t.get('width', 0):.0f} px wide, {t['hidden']:.0f} px cut off: {head}"
                    ),
                    where,
                    t,
                )
            )
    return problems


LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def check_requests(page: str, requests: list[dict]) -> list[Problem]:
    """Requests from the browser: ``url`` plus ``status`` or ``failure``.

    Any http(s)/ws(s) request to another host is an ``external_request``; a local one
    answered >= 400 or failed is a ``missing_resource``. data:/blob: URLs are ignored.
    """
    problems = []
    seen = set()
    for req in requests:
        url = req.get("url", "")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or url in seen:
            continue
        seen.add(url)
        if parts.hostname not in LOCAL_HOSTS:
            problems.append(Problem("external_request", page, snippet(url), "network"))
        elif (req.get("status") or 0) >= 400 or (
            req.get("failure") and "ERR_ABORTED" not in req["failure"]  # cancelled, not missing
        ):
            why = req.get("failure") or f"HTTP {req.get('status')}"
            problems.append(
                Problem("missing_resource", page, snippet(f"{parts.path}: {why}"), "network")
            )
    return problems


def check_page_html(page: str, html: str) -> list[Problem]:
    """Every check that needs only the rendered HTML of one page (links aside)."""
    return check_outputs(page, html) + check_raw_tex(page, html) + check_alt_text(page, html)


# --------------------------------------------------------------------------------------
# Site walking, summary and report
# --------------------------------------------------------------------------------------


def book_pages(html_dir: Path) -> list[str]:
    """Pages to render: every ``*.html`` except the index/search pages and assets."""
    pages = []
    for path in sorted(html_dir.rglob("*.html")):
        rel = path.relative_to(html_dir).as_posix()
        if rel.split("/")[0] in SKIP_DIRS or posixpath.basename(rel) in SKIP_PAGES:
            continue
        pages.append(rel)
    return pages


def site_files(html_dir: Path) -> set[str]:
    return {p.relative_to(html_dir).as_posix() for p in html_dir.rglob("*") if p.is_file()}


def counts_by_category(problems: list[Problem]) -> dict[str, int]:
    counter = Counter(p.category for p in problems)
    return {cat: counter.get(cat, 0) for cat in CATEGORIES}


def summarize(
    problems: list[Problem], allowed: set[str] = WARN_BY_DEFAULT, per_group: int = 3
) -> tuple[str, bool]:
    """Readable summary and whether the check failed (a non-allowed category has problems)."""
    counts = counts_by_category(problems)
    failed = any(n and cat not in allowed for cat, n in counts.items())
    out = ["", "problems by category:"]
    for cat, n in counts.items():
        flag = "" if not n else ("  (allowed: warning only)" if cat in allowed else "  FAIL")
        out.append(f"  {cat:<18} {n:>5}{flag}")
    groups: dict[str, dict[str, list[Problem]]] = defaultdict(lambda: defaultdict(list))
    for p in problems:
        groups[p.page][p.category].append(p)
    for page in sorted(groups):
        out.append("")
        out.append(page)
        for cat in CATEGORIES:
            items = groups[page].get(cat)
            if not items:
                continue
            tag = "warn" if cat in allowed else "FAIL"
            out.append(f"  [{tag}] {cat}: {len(items)}")
            for p in items[:per_group]:
                where = f"{p.where}: " if p.where else ""
                out.append(f"      {where}{p.snippet}")
            if len(items) > per_group:
                out.append(f"      … and {len(items) - per_group} more")
    total = sum(counts.values())
    blocking = sum(n for cat, n in counts.items() if cat not in allowed)
    out.append("")
    if failed:
        out.append(f"check-book: FAILED, {blocking} problem(s) ({total} in all)")
    else:
        out.append(f"check-book: OK ({total} allowed problem(s))" if total else "check-book: OK")
    return "\n".join(out), failed


def screenshot_name(page: str) -> str:
    return page.removesuffix(".html").replace("/", "__") + ".png"


# --------------------------------------------------------------------------------------
# Browser
# --------------------------------------------------------------------------------------

_LOAD_JS = """
async (timeoutMs) => {
  const withTimeout = (p) => Promise.race([p, new Promise(r => setTimeout(() => r('timeout'), timeoutMs))]);
  const imgs = Array.from(document.images);
  imgs.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
  await withTimeout(Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r, {once: true}); i.addEventListener('error', r, {once: true});
  }))));
  if (document.fonts) await withTimeout(document.fonts.ready);
  const mj = window.MathJax;
  let mathjax = 'absent';
  if (mj && mj.startup && mj.startup.promise) {
    mathjax = (await withTimeout(mj.startup.promise.then(() => 'typeset'))) || 'typeset';
  } else if (mj) {
    mathjax = 'configured, not loaded';
  }
  return mathjax;
}
"""

_MEASURE_JS = """
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('article')
    || document.querySelector('[role=main]') || document.querySelector('main') || document.body;
  const a = article.getBoundingClientRect();
  const cs = getComputedStyle(article);
  const colLeft = a.left + parseFloat(cs.paddingLeft || 0);
  const colRight = a.right - parseFloat(cs.paddingRight || 0);
  const columnWidth = colRight - colLeft;
  const scrollBox = (el) => {
    for (let n = el.parentElement; n && n !== article; n = n.parentElement) {
      const o = getComputedStyle(n).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden' || o === 'clip') return n;
    }
    return null;
  };
  const pastColumn = (el) => {
    const r = el.getBoundingClientRect();
    if (!r.width) return 0;
    const box = scrollBox(el);
    if (box) {
      const b = box.getBoundingClientRect();
      return Math.max(0, b.right - colRight);  // the scroll box itself must fit
    }
    return Math.max(0, r.right - colRight);
  };
  const images = Array.from(article.querySelectorAll('img')).map(i => ({
    src: i.currentSrc || i.src, alt: i.getAttribute('alt'),
    natural_width: i.naturalWidth, natural_height: i.naturalHeight,
    width: i.getBoundingClientRect().width, height: i.getBoundingClientRect().height,
    column_width: columnWidth, overflow: pastColumn(i),
    top: Math.round(i.getBoundingClientRect().top + window.scrollY),
  }));
  const hiddenInBox = (el) => {
    const box = scrollBox(el);
    if (!box) return 0;
    return Math.max(0, el.getBoundingClientRect().right - box.getBoundingClientRect().right);
  };
  const tables = Array.from(article.querySelectorAll('table')).map(t => ({
    overflow: pastColumn(t), hidden: hiddenInBox(t),
    width: t.getBoundingClientRect().width, column_width: columnWidth,
    top: Math.round(t.getBoundingClientRect().top + window.scrollY),
    text: (t.querySelector('tr') ? t.querySelector('tr').innerText : '').replace(/\\s+/g, ' ').slice(0, 100),
  }));
  return {images, tables, column_width: columnWidth,
          page_width: document.documentElement.scrollWidth,
          page_height: document.documentElement.scrollHeight};
}
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


@dataclass
class Server:
    root: Path
    httpd: http.server.ThreadingHTTPServer | None = None

    def __enter__(self) -> str:
        handler = functools.partial(_QuietHandler, directory=str(self.root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def __exit__(self, *exc) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


def find_chromium(explicit: str | None) -> str | None:
    for candidate in (explicit, os.environ.get("CHROMIUM"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render_site(
    html_dir: Path,
    pages: list[str],
    out_dir: Path,
    chromium: str,
    width: int = 1400,
    height: int = 900,
    timeout_s: float = 60.0,
    screenshots: bool = True,
    log=print,
) -> list[dict]:
    """Render each page; return per page its rendered HTML, measurements and requests."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    screen_dir = out_dir / "screens"
    screen_dir.mkdir(parents=True, exist_ok=True)
    results = []
    with (
        Server(html_dir) as base,
        sync_playwright() as pw,
        tempfile.TemporaryDirectory(prefix="check-book-profile-") as profile,
    ):
        context = pw.chromium.launch_persistent_context(
            profile,  # a fresh --user-data-dir
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": width, "height": height},
            device_scale_factor=1,
            service_workers="block",
        )
        try:
            for page_rel in pages:
                started = time.monotonic()
                requests: list[dict] = []
                errors: list[str] = []

                def route(rt, request, requests=requests):
                    """Record and block every request that would leave this machine."""
                    host = urlsplit(request.url).hostname
                    if request.url.startswith(("http:", "https:", "ws:", "wss:")) and (
                        host not in LOCAL_HOSTS
                    ):
                        requests.append({"url": request.url, "failure": "blocked (offline)"})
                        rt.abort("internetdisconnected")
                    else:
                        rt.continue_()

                page = context.new_page()
                page.route("**/*", route)
                page.on(
                    "response",
                    lambda r, requests=requests: requests.append(
                        {"url": r.url, "status": r.status}
                    ),
                )
                page.on(
                    "requestfailed",
                    lambda r, requests=requests: requests.append(
                        {"url": r.url, "failure": r.failure or "failed"}
                    ),
                )
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                entry: dict = {"page": page_rel, "requests": requests, "errors": errors}
                try:
                    page.goto(base + page_rel, wait_until="load", timeout=timeout_s * 1000)
                    try:
                        page.wait_for_load_state("networkidle", timeout=10_000)
                    except PlaywrightTimeout:
                        pass
                    entry["mathjax"] = page.evaluate(_LOAD_JS, 15_000)
                    entry.update(page.evaluate(_MEASURE_JS))
                    entry["html"] = page.content()
                    if screenshots:
                        shot = screen_dir / screenshot_name(page_rel)
                        page.screenshot(path=str(shot), full_page=True, timeout=timeout_s * 1000)
                        entry["screenshot"] = str(shot)
                except PlaywrightError as exc:  # includes timeouts
                    entry["render_error"] = snippet(str(exc), 300)
                finally:
                    page.close()
                entry["seconds"] = round(time.monotonic() - started, 2)
                log(
                    f"  {page_rel}: {entry['seconds']:.1f} s, "
                    f"{entry.get('page_height', '?')} px tall, MathJax {entry.get('mathjax', '?')}"
                )
                results.append(entry)
        finally:
            context.close()
    return results


def analyse(results: list[dict], files: set[str], min_scale: float) -> list[Problem]:
    """All problems of all rendered pages (pure: ``results`` as ``render_site`` returns)."""
    ids = {r["page"]: collect_ids(r["html"]) for r in results if "html" in r}
    problems: list[Problem] = []
    for r in results:
        page = r["page"]
        if "render_error" in r:
            problems.append(Problem("js_error", page, f"page did not render: {r['render_error']}"))
        if "html" in r:
            problems += check_page_html(page, r["html"])
            problems += check_links(page, collect_hrefs(r["html"]), files, ids)
        problems += check_images(page, r.get("images", []), min_scale)
        problems += check_tables(page, r.get("tables", []))
        problems += check_requests(page, r.get("requests", []))
        problems += [Problem("js_error", page, snippet(e), "console") for e in r.get("errors", [])]
    return problems


def parse_categories(values: list[str], option: str) -> set[str]:
    """``["warning,progress", "alt_text"]`` -> a set; ``all`` means every category."""
    cats = set()
    for value in values:
        for cat in filter(None, (v.strip() for v in value.split(","))):
            if cat == "all":
                cats |= set(CATEGORIES)
            elif cat not in CATEGORIES:
                raise SystemExit(
                    f"{option}: unknown category {cat!r}; one of {', '.join(CATEGORIES)}"
                )
            else:
                cats.add(cat)
    return cats


def allowed_categories(allow: list[str], fail_on: list[str]) -> set[str]:
    """Categories reported as warnings: the defaults plus ``--allow``, less ``--fail-on``."""
    return (set(WARN_BY_DEFAULT) | parse_categories(allow, "--allow")) - parse_categories(
        fail_on, "--fail-on"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html", default="_build/html", help="built book (default: _build/html)")
    ap.add_argument("--out", default="_build/check", help="report and screenshots")
    ap.add_argument("--width", type=int, default=1400, help="viewport width in px")
    ap.add_argument("--height", type=int, default=900, help="viewport height in px")
    ap.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="CATEGORY",
        help="report CATEGORY as a warning, not a failure (repeatable, comma list, or 'all')",
    )
    ap.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="CATEGORY",
        help=f"fail on CATEGORY even if warning-only by default ({', '.join(sorted(WARN_BY_DEFAULT))})",
    )
    ap.add_argument("--page", action="append", default=[], metavar="GLOB", help="only these pages")
    ap.add_argument("--min-scale", type=float, default=0.4, help="image_unreadable threshold")
    ap.add_argument("--chromium", default=None, help="browser binary (default /usr/bin/chromium)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per page load")
    ap.add_argument("--no-screenshots", action="store_true")
    ap.add_argument("--list-categories", action="store_true")
    args = ap.parse_args(argv)

    if args.list_categories:
        for cat, text in CATEGORIES.items():
            tag = " (warning only unless --fail-on)" if cat in WARN_BY_DEFAULT else ""
            print(f"{cat:<18} {text}{tag}")
        return 0
    allowed = allowed_categories(args.allow, args.fail_on)
    html_dir, out_dir = Path(args.html), Path(args.out)
    if not (html_dir / "index.html").exists() and not any(html_dir.rglob("*.html")):
        print(f"check-book: no built book under {html_dir} (run `make book-html`)", file=sys.stderr)
        return 2
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print("check-book: no Chromium (apt-get install -y chromium)", file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("check-book: needs Playwright (pip install playwright)", file=sys.stderr)
        return 2

    pages = book_pages(html_dir)
    if args.page:
        pages = [p for p in pages if any(fnmatch.fnmatch(p, g) for g in args.page)]
    files = site_files(html_dir)
    # Redirect pages (the root index.html of a Jupyter Book) are not rendered: their
    # target is rendered as a page of its own; only the target's existence is checked.
    redirects: dict[str, str] = {}
    problems: list[Problem] = []
    for page in list(pages):
        target, found = check_redirect(page, (html_dir / page).read_text(errors="replace"), files)
        if target is not None:
            redirects[page] = target
            problems += found
            pages.remove(page)
    if not pages:
        print(f"check-book: no pages to check under {html_dir}", file=sys.stderr)
        return 2
    screen_dir = out_dir / "screens"
    if screen_dir.exists():
        for old in screen_dir.glob("*.png"):
            old.unlink()
    started = time.monotonic()
    print(f"check-book: {len(pages)} page(s) of {html_dir} in {chromium} at {args.width} px")
    for page, target in redirects.items():
        print(f"  {page}: redirect to {target} (not rendered)")
    results = render_site(
        html_dir,
        pages,
        out_dir,
        chromium,
        width=args.width,
        height=args.height,
        timeout_s=args.timeout,
        screenshots=not args.no_screenshots,
    )
    problems += analyse(results, files, args.min_scale)
    elapsed = time.monotonic() - started
    text, failed = summarize(problems, allowed)
    external = sorted({p.snippet for p in problems if p.category == "external_request"})
    report = {
        "ok": not failed,
        "html": str(html_dir),
        "width": args.width,
        "seconds": round(elapsed, 1),
        "pages": [
            {k: r.get(k) for k in ("page", "screenshot", "mathjax", "page_height", "seconds")}
            | ({"render_error": r["render_error"]} if "render_error" in r else {})
            for r in results
        ],
        "redirects": redirects,
        "counts": counts_by_category(problems),
        "allowed": sorted(allowed),
        "external_urls": external,
        "problems": [asdict(p) for p in problems],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(text)
    print(f"check-book: {len(pages)} page(s) in {elapsed:.1f} s; report {out_dir / 'report.json'}")
    print(f"check-book: screenshots in {screen_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
