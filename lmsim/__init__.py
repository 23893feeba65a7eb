"""lmsim: how language models relate to each other.

Activation extraction, streaming float64 moments, similarity metrics, language model
decomposition and a small offline model zoo, behind a reproducible Jupyter paper book.
"""

__version__ = "0.1.0"

import warnings as _warnings

# Without ipywidgets, tqdm.auto falls back to text bars in notebooks (what the static book
# wants) but warns once per kernel; the warning would top every executed page.
_warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm")


def __getattr__(name: str):
    # `lmsim.threads(n)` without importing torch at `import lmsim`.
    if name in ("threads", "default_threads", "thread_info", "caller_choice"):
        from lmsim import _threads

        return getattr(_threads, name)
    raise AttributeError(f"module 'lmsim' has no attribute {name!r}")
