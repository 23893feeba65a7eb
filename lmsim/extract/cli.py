"""``python -m lmsim.extract``: moments of a corpus, on one process or under torchrun."""

from __future__ import annotations

from collections.abc import Sequence

from lmsim.extract.align import POOLINGS, SUBWORDS
from lmsim.extract.distributed import LauncherProcessGroup
from lmsim.extract.streaming import extract_moments


def row_options(args) -> dict:
    """The options of one extraction's rows that every command line takes alike
    (``pooling, subword, max_length, batch_size, device, dtype, zoo_profile``)."""
    return {
        "pooling": args.pooling,
        "subword": args.subword,
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "device": args.device,
        "dtype": args.dtype,
        "zoo_profile": args.zoo_profile,
    }


def moments_from_options(args, models, texts, layers, progress: bool):
    """:func:`extract_moments` with the extraction options both command lines share
    (:func:`row_options` plus ``shard_size`` and ``no_cache``: ``python -m lmsim.extract``
    and ``lmsim extract``)."""
    return extract_moments(
        models,
        texts,
        layers=layers,
        **row_options(args),
        shard_size=args.shard_size,
        cache=not args.no_cache,
        progress=progress,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lmsim.extract``: moments of a corpus, on one process or data parallel.

    Under ``torchrun`` (or ``accelerate launch``) the launcher's environment initialises
    the default process group (NCCL on GPUs, gloo on CPUs), every rank runs
    :func:`extract_moments` on its share of the shards, and rank 0 saves the merged
    moments::

        torchrun --nproc_per_node 8 -m lmsim.extract --models bert-base-uncased gpt2 \\
            --corpus ptb --split valid --pooling word --out ptb_valid.safetensors

    Load the result with :meth:`lmsim.moments.Moments.load`.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m lmsim.extract",
        description="Stream the pooled hidden states of models over a corpus into float64 "
        "moments (a safetensors file); data parallel under torchrun / accelerate launch.",
    )
    parser.add_argument("--models", nargs="+", required=True, help="names, zoo/<name>, dirs")
    parser.add_argument("--corpus", required=True, help="lmsim.data.load_corpus name or .txt")
    parser.add_argument("--split", default="valid", help="corpus split (default: valid)")
    parser.add_argument("--max-docs", type=int, default=None, help="keep this many lines")
    parser.add_argument("--pooling", choices=POOLINGS, default="mean")
    parser.add_argument("--subword", choices=SUBWORDS, default="last")
    parser.add_argument("--layers", nargs="+", default=["all"], help="'all', 'last' or ints")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shard-size", type=int, default=256)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--zoo-profile", default="default")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write shards")
    parser.add_argument("--out", required=True, help="where rank 0 saves the moments")
    args = parser.parse_args(argv)

    from lmsim.data import load_corpus

    # An entry point may read the launcher's environment; the library function only sees
    # the process group it makes.
    group = LauncherProcessGroup(args.device)
    try:
        texts = load_corpus(args.corpus, split=args.split, max_docs=args.max_docs)
        if args.pooling == "word":
            texts = [t.split() for t in texts]
        layers = (
            args.layers[0] if args.layers in (["all"], ["last"]) else list(map(int, args.layers))
        )
        mom = moments_from_options(args, args.models, texts, layers, progress=True)
        if group.rank == 0:
            mom.save(args.out)
            print(f"{mom.n:,} rows x {mom.total_dim:,} features -> {args.out}")
    finally:
        group.close()
    return 0
