"""A Sphinx extension of the book (``_config.yml``: ``sphinx: local_extensions``): every
page's script tags once.

Jupyter Book 1 loads sphinx-thebe, which registers an inline script (``const THEBE_JS_URL =
...``) with ``app.add_js_file(None, body=...)`` when the sources are read. Sphinx 7.4 keeps it
in the builder's list as filename ``None`` and, before writing, adds every registered script
again as filename ``''``; the two compare unequal, so each page declared the constant twice
and the browser logged ``Identifier 'THEBE_JS_URL' has already been declared``. This drops a
script tag equal to an earlier one (same file or body, same attributes) from each page's
context; tools/check_book.py fails on any JavaScript error.
"""

from __future__ import annotations


def _key(script) -> tuple:
    """A script tag's identity: its file (None and '' alike) and its attributes (the body)."""
    attributes = getattr(script, "attributes", None) or {}
    filename = getattr(script, "filename", script) or ""
    return (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def unique_scripts(scripts: list) -> list:
    """``scripts`` without the repeats of an earlier tag, in order."""
    seen, kept = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            kept.append(script)
    return kept


def _dedupe(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if isinstance(scripts, list):
        scripts[:] = unique_scripts(scripts)


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
