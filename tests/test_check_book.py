"""tools/check_book.py: the pure detection functions on tiny synthetic HTML (fast, no
browser), and one ``slow`` end-to-end run in headless Chromium on a two-page site."""

import importlib.util
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "check_book.py"


def _load():
    spec = importlib.util.spec_from_file_location("check_book", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_book"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


cb = _load()


def page(article: str, head: str = "") -> str:
    """A Jupyter Book-like page: the checks look inside ``article.bd-article``."""
    return (
        f"<html><head>{head}</head><body><nav><a href='#'>top</a></nav>"
        f"<main><article class='bd-article'>{article}</article></main></body></html>"
    )


def output(text: str) -> str:
    """A MyST-NB cell output."""
    return (
        "<div class='cell_output docutils container'><div class='output stream'>"
        f"<div class='highlight'><pre>{text}</pre></div></div></div>"
    )


def cats(problems) -> list[str]:
    return sorted(p.category for p in problems)


CLEAN = page(
    "<section id='intro'><h1>Intro</h1><p>The fit <span class='math'>"
    "<mjx-container>R2</mjx-container></span> is 0.91 (5 % lower than $10 of cost).</p>"
    "<div class='cell docutils container'><div class='cell_input'><pre>x = r'\\(' + '$$'\n"
    "print('/tmp/not-an-output')</pre></div>"
    + output("rho = 0.93 at T = 512\n100 models, 3 ok")
    + "</div><img src='../_images/fig.png' alt='Heatmap of CKA by layer'>"
    "<a href='#intro'>back</a> <a href='other.html#sec'>other</a> "
    "<a href='https://example.org/x'>paper</a> <a href='mailto:a@b.c'>mail</a></section>"
)


# -- outputs ---------------------------------------------------------------------------


def test_clean_page_has_no_problems():
    assert cb.check_page_html("a.html", CLEAN) == []
    files = {"a.html", "other.html"}
    ids = {"a.html": cb.collect_ids(CLEAN), "other.html": {"sec"}}
    assert cb.check_links("a.html", cb.collect_hrefs(CLEAN), files, ids) == []


def test_traceback_is_one_problem_with_its_error_line():
    text = (
        'Traceback (most recent call last):\n  File "x.py", line 1, in &lt;module&gt;\n'
        "ValueError: bad shape"
    )
    problems = cb.check_outputs("p.html", page(output(text)))
    assert cats(problems) == ["traceback"]
    assert "ValueError: bad shape" in problems[0].snippet
    assert problems[0].where == "output 1"


def test_ipython_traceback_and_error_lines():
    ipython = "ValueError      Traceback (most recent call last)\nCell In[3], line 1\nValueError: x"
    assert cats(cb.check_output_text("p", "o", ipython)) == ["traceback"]
    assert cats(cb.check_output_text("p", "o", "Error: no such model\nKeyError: 'a'")) == [
        "traceback",
        "traceback",
    ]
    assert cb.check_output_text("p", "o", "error rate: 0.1\nErrors: none") == []


@pytest.mark.parametrize(
    "line",
    [
        "x.py:3: RuntimeWarning: invalid value encountered in divide",
        "UserWarning: something",
        "FutureWarning: the default will change",
        "DeprecationWarning: use y",
        "Warning: clipping",
        "WARNING:root:careful",
    ],
)
def test_warnings(line):
    assert cats(cb.check_output_text("p", "o", line)) == ["warning"]


@pytest.mark.parametrize(
    "line",
    [
        "pairs:  42%|████▏     | 850/2025 [00:00<00:01, 1347.94it/s]",
        "extract: 0text [00:00, ?text/s]",
        "train: 3/10 [00:05<00:12, 1.71s/it]",
        "  0%|          | 0/50 [00:00<?, ?it/s]",
    ],
)
def test_progress_bars(line):
    assert cats(cb.check_output_text("p", "o", line)) == ["progress"]


def test_each_progress_line_counts():
    text = "\r".join(f"a: {i}%|#  | {i}/100 [00:01<00:02, 3.0it/s]" for i in range(5))
    assert cats(cb.check_output_text("p", "o", text)) == ["progress"] * 5


@pytest.mark.parametrize(
    "line",
    [
        "models under /root/.cache/lmsim/zoo/default",
        "/home/me/x.csv",
        "wrote /tmp/abc",
        "/work/main/lmsim/metrics/pairwise.py:162",
        "lib/python3.11/site-packages/torch/nn.py",
    ],
)
def test_local_paths_in_outputs(line):
    assert cats(cb.check_output_text("p", "o", line)) == ["local_path"]


def test_local_path_in_prose_too_and_warning_line_counts_twice():
    html = page("<p>cache in /root/.cache</p>" + output("/work/x.py:1: UserWarning: y"))
    problems = cb.check_outputs("p", html)
    assert cats(problems) == ["local_path", "local_path", "warning"]
    assert {p.where for p in problems} == {"text", "output 1"}


# -- TeX, alt text ---------------------------------------------------------------------


def test_raw_tex_found_outside_code():
    html = page(
        "<p>The fit <span class='math'>\\(R^2\\)</span> and</p><div class='math'>$$x^2$$</div>"
        "<pre>\\(not this\\)</pre><code>$$</code>"
    )
    problems = cb.check_raw_tex("p", html)
    assert cats(problems) == ["raw_tex", "raw_tex"]
    assert problems[0].snippet == "\\(R^2\\)"


def test_alt_text():
    html = page(
        "<img src='a.png' alt='../../_images/904e.png'><img src='b.png'>"
        "<img src='c.png' alt=''><img src='d.png' alt='fig.PNG'>"
        "<img src='e.png' alt='Training curves of the four MLMs'>"
    )
    assert cats(cb.check_alt_text("p", html)) == ["alt_text"] * 4
    # images outside the article (the theme's logo) are not the book's figures
    logo = "<body><nav><img src='logo.png'></nav><article class='bd-article'>x</article></body>"
    assert cb.check_alt_text("p", logo) == []


# -- links -----------------------------------------------------------------------------


def test_resolve_href():
    assert cb.resolve_href("book/a/x.html", "../b/y.html#s") == ("book/b/y.html", "s")
    assert cb.resolve_href("book/a/x.html", "#frag%20x") == ("book/a/x.html", "frag x")
    assert cb.resolve_href("book/a/x.html", "./") == ("book/a/index.html", "")
    assert cb.resolve_href("book/x.html", "/genindex.html") == ("genindex.html", "")
    assert cb.resolve_href("x.html", "../../up.html") == ("../../up.html", "")
    for external in ("https://a.org/b.html", "//cdn.org/x.js", "mailto:x@y", "javascript:void(0)"):
        assert cb.resolve_href("x.html", external) is None


def test_broken_links_and_anchors():
    html = page(
        "<a href='b.html'>ok</a><a href='b.html#sec'>ok</a><a href='b.html#nope'>anchor</a>"
        "<a href='missing.html'>link</a><a href='#nowhere'>anchor</a><a href='../out.html'>x</a>"
        "<a href='genindex.html#X'>not rendered: no anchor check</a><a href='_images/f.png'>f</a>"
    )
    files = {"a.html", "b.html", "genindex.html", "_images/f.png"}
    ids = {"a.html": cb.collect_ids(html), "b.html": {"sec"}}
    problems = cb.check_links("a.html", cb.collect_hrefs(html), files, ids)
    assert cats(problems) == ["broken_anchor", "broken_anchor", "broken_link", "broken_link"]


def test_collect_ids_includes_a_name():
    assert cb.collect_ids("<div id='x'></div><a name='y'></a>") == {"x", "y"}


def test_redirect_page():
    html = '<meta http-equiv="Refresh" content="0; url=book/intro.html" />'
    assert cb.meta_refresh_target(html) == "book/intro.html"
    assert cb.check_redirect("index.html", html, {"book/intro.html"}) == ("book/intro.html", [])
    target, problems = cb.check_redirect("index.html", html, set())
    assert target == "book/intro.html" and cats(problems) == ["broken_link"]
    assert cb.check_redirect("a.html", CLEAN, set()) == (None, [])


# -- browser measurements --------------------------------------------------------------


def test_images():
    common = {"column_width": 784, "overflow": 0}
    images = [
        {"src": "http://127.0.0.1:1/_images/ok.png", "natural_width": 1000, "width": 784, **common},
        {"src": "/_images/wide.png", "natural_width": 3310, "width": 784, **common},
        {
            "src": "/_images/out.png",
            "natural_width": 1000,
            "width": 1000,
            **common,
            "overflow": 216,
        },
        {"src": "/_images/gone.png", "natural_width": 0, "width": 0, **common},
        {"src": "/_images/hidden.png", "natural_width": 5000, "width": 0, **common},
    ]
    problems = cb.check_images("p", images)
    assert cats(problems) == ["image_broken", "image_overflow", "image_unreadable"]
    unreadable = next(p for p in problems if p.category == "image_unreadable")
    assert "wide.png: 3310 px shown at 784 px (24% < 40%)" == unreadable.snippet
    assert cb.check_images("p", images[1:2], min_scale=0.2) == []


def test_tables():
    tables = [
        {"overflow": 0, "hidden": 0, "text": "fits"},
        {"overflow": 300, "hidden": 0, "text": "sticks out"},
        {"overflow": 0, "hidden": 632, "width": 1416, "text": "scrolls"},
        {"overflow": 0, "hidden": 2, "text": "border"},
    ]
    assert cats(cb.check_tables("p", tables)) == ["table_overflow", "table_scroll"]


def test_requests():
    requests = [
        {"url": "http://127.0.0.1:8000/_static/x.css", "status": 200},
        {"url": "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", "failure": "x"},
        {"url": "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", "failure": "y"},
        {"url": "http://127.0.0.1:8000/_static/missing.js", "status": 404},
        {"url": "http://localhost:8000/y.js", "failure": "net::ERR_FAILED"},
        {"url": "http://localhost:8000/cancelled.js", "failure": "net::ERR_ABORTED"},
        {"url": "data:image/png;base64,AAAA", "status": 200},
    ]
    problems = cb.check_requests("p", requests)
    assert cats(problems) == ["external_request", "missing_resource", "missing_resource"]
    assert problems[0].snippet.startswith("https://cdn.jsdelivr.net/")


def test_analyse_combines_a_rendered_page():
    results = [
        {
            "page": "a.html",
            "html": page(output("x: 50%|#####     | 1/2 [00:01<00:01, 1.0it/s]")),
            "images": [{"src": "f.png", "natural_width": 0}],
            "tables": [],
            "requests": [{"url": "https://cdn.example/x.js", "failure": "blocked"}],
            "errors": ["ReferenceError: x is not defined"],
        },
        {"page": "b.html", "render_error": "Timeout 60000ms exceeded"},
    ]
    problems = cb.analyse(results, {"a.html", "b.html"}, 0.4)
    assert cats(problems) == [
        "external_request",
        "image_broken",
        "js_error",
        "js_error",
        "progress",
    ]


# -- site, summary, options ------------------------------------------------------------


def test_book_pages_skip_index_search_and_assets(tmp_path):
    for rel in [
        "index.html",
        "genindex.html",
        "search.html",
        "book/intro.html",
        "book/ch/01.html",
        "_static/x.html",
        "_sources/book/intro.html",
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("<html></html>")
    assert cb.book_pages(tmp_path) == ["book/ch/01.html", "book/intro.html", "index.html"]
    assert cb.screenshot_name("book/ch/01.html") == "book__ch__01.png"


def test_summary_counts_and_allow():
    problems = [cb.Problem("progress", "a.html", f"{i}%|", "output 1") for i in range(5)] + [
        cb.Problem("table_scroll", "a.html", "wide")
    ]
    text, failed = cb.summarize(problems, cb.allowed_categories([], []))
    assert failed
    assert "progress               5  FAIL" in text
    assert "table_scroll           1  (allowed" in text
    assert "… and 2 more" in text
    _, failed = cb.summarize(problems, cb.allowed_categories(["progress"], []))
    assert not failed
    _, failed = cb.summarize(problems, cb.allowed_categories(["progress"], ["table_scroll"]))
    assert failed
    # A JavaScript error fails by default (the book's pages log none).
    _, failed = cb.summarize(
        [cb.Problem("js_error", "a.html", "boom")], cb.allowed_categories([], [])
    )
    assert failed
    assert cb.counts_by_category([])["traceback"] == 0
    assert cb.allowed_categories(["all"], []) == set(cb.CATEGORIES)
    with pytest.raises(SystemExit):
        cb.allowed_categories(["nonsense"], [])


def test_list_categories_and_missing_book(tmp_path, capsys):
    assert cb.main(["--list-categories"]) == 0
    assert "external_request" in capsys.readouterr().out
    assert cb.main(["--html", str(tmp_path / "none"), "--out", str(tmp_path / "out")]) == 2


# -- end to end in Chromium ------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    """A grey RGB PNG, written by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80" * (3 * width) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.mark.slow
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium")
def test_browser_check_on_two_page_site(tmp_path):
    pytest.importorskip("playwright")
    site, out = tmp_path / "html", tmp_path / "check"
    (site / "_images").mkdir(parents=True)
    (site / "_images" / "wide.png").write_bytes(_png(2400, 40))
    (site / "_images" / "small.png").write_bytes(_png(300, 40))
    style = "<style>article{width:600px}img{max-width:100%}</style>"
    (site / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=a.html" />')
    (site / "a.html").write_text(
        page(
            "<h1 id='top'>A</h1><p>see <a href='b.html#sec'>B</a>, <a href='b.html#gone'>B</a>"
            " and <a href='c.html'>C</a>; <span class='math'>\\(x^2\\)</span></p>"
            "<img src='_images/wide.png' alt='_images/wide.png'>"
            + output("eval: 50%|#####     | 1/2 [00:01&lt;00:01, 1.0it/s]")
            + "<script src='https://cdn.invalid/mathjax.js'></script>",
            head=style,
        )
    )
    # A stand-in for a local MathJax: typesets .math after 0.8 s; the check must wait for it.
    (site / "_static").mkdir()
    (site / "_static" / "mj.js").write_text(
        "window.MathJax = {startup: {promise: new Promise(r => setTimeout(() => {"
        "document.querySelectorAll('.math').forEach(e => {"
        "e.innerHTML = '<mjx-container>x2</mjx-container>'; }); r(); }, 800))}};"
    )
    (site / "b.html").write_text(
        page(
            "<h1 id='sec'>B</h1><p>Clean: <span class='math'>\\(x^2\\)</span>.</p>"
            "<img src='_images/small.png' alt='A small figure'>",
            head=style + "<script defer src='_static/mj.js'></script>",
        )
    )
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--html", str(site), "--out", str(out), "--width", "1000"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["redirects"] == {"index.html": "a.html"}
    assert [p["page"] for p in report["pages"]] == ["a.html", "b.html"]
    assert [p["mathjax"] for p in report["pages"]] == ["absent", "typeset"]
    by_page = {}
    for p in report["problems"]:
        by_page.setdefault(p["page"], []).append(p["category"])
    assert sorted(by_page["a.html"]) == [
        "alt_text",
        "broken_anchor",
        "broken_link",
        "external_request",
        "image_unreadable",
        "progress",
        "raw_tex",
    ]
    assert "b.html" not in by_page
    assert report["external_urls"] == ["https://cdn.invalid/mathjax.js"]
    for shot in ("a.png", "b.png"):
        assert (out / "screens" / shot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "progress" in proc.stdout and "FAIL" in proc.stdout
    # downgraded categories make the same site pass
    allow = "alt_text,broken_anchor,broken_link,external_request,image_unreadable,progress,raw_tex"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--html", str(site), "--out", str(out), "--allow", allow],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check-book: OK" in proc.stdout


def test_book_pages_declare_each_script_once():
    """tools/book_scripts.py drops a script tag equal to an earlier one: Sphinx 7.4 listed
    sphinx-thebe's inline ``const THEBE_JS_URL`` once as file None and once as file '', a
    JavaScript error ("already been declared") on every page."""
    import yaml

    spec = importlib.util.spec_from_file_location(
        "book_scripts", REPO / "tools" / "book_scripts.py"
    )
    book_scripts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(book_scripts)

    class Script(str):
        def __new__(cls, filename, **attributes):
            self = super().__new__(cls, filename or "")
            self.filename, self.attributes = filename, attributes
            return self

    thebe = "const THEBE_JS_URL = 'x'"
    scripts = [
        Script("_static/a.js"),
        Script(None, body=thebe),
        Script("_static/b.js", **{"async": "async"}),
        Script("", body=thebe),
        Script("_static/a.js"),
        Script(None, body="other"),
    ]
    kept = book_scripts.unique_scripts(scripts)
    assert [(s.filename, s.attributes.get("body")) for s in kept] == [
        ("_static/a.js", None),
        (None, thebe),
        ("_static/b.js", None),
        (None, "other"),
    ]
    context = {"script_files": list(scripts)}
    book_scripts._dedupe(None, "page", "page.html", context, None)
    assert len(context["script_files"]) == 4
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"] == {"book_scripts": "tools"}
