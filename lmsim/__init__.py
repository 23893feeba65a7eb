"""lmsim: how language models relate to each other.

Activation extraction, streaming float64 moments, similarity metrics, language model
decomposition and a small offline model zoo, behind a reproducible Jupyter paper book.
"""

__version__ = "0.1.0"
