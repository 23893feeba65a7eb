"""Where the Hugging Face dataset loaders get ``load_dataset`` from."""

from __future__ import annotations

from lmsim._dryrun import dry_run


def hub_datasets():
    """The ``datasets`` module, or during a dry run (:mod:`lmsim._dryrun`) the stand-in module
    :mod:`lmsim.data._standin_sets`, whose ``load_dataset`` generates sets with the real schema.

    Raises
    ------
    ImportError
        ``datasets`` is not installed (never during a dry run).
    """
    if dry_run():
        import lmsim.data._standin_sets as standin_sets

        return standin_sets
    import datasets

    return datasets
