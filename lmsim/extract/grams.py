"""Linear-layer inputs (:func:`extract_linear_grams`): the Grams RegMean merges with."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from lmsim._runtime import autocast_dtype, resolve_device
from lmsim._threads import thread_policy
from lmsim.encoding import encode_inputs, input_form, model_kind, pad_batch
from lmsim.extract.align import _check_texts
from lmsim.extract.hooks import scoped_hooks
from lmsim.extract.logits import model_inputs
from lmsim.extract.pooling import _batches, _progress
from lmsim.extract.runs import _autocast, _prepare
from lmsim.moments import Moments


@thread_policy
def extract_linear_grams(
    model: nn.Module,
    tokenizer,
    texts: Sequence,
    *,
    kind: str | None = None,
    batch_size: int = 16,
    max_length: int | None = None,
    device="auto",
    dtype=None,
    paper_compat_padding: bool = False,
    progress: bool = True,
) -> dict[str, Moments]:
    """Moments of the inputs of every linear layer (``nn.Linear`` and GPT-2 ``Conv1D``).

    Forward pre-hooks record each layer's input at real-token positions (padding
    excluded). ``mom.gram("input")`` is then RegMean's ``G = XᵀX`` (Jin et al. 2023,
    Eq. 2) and ``mom.n`` the number of positions.

    Parameters
    ----------
    model : nn.Module
        A Hugging Face model (task heads included: their inputs are recorded too).
    tokenizer : tokenizer
    texts : list of str, of (str, str) pairs, or of word lists
        Encoded by :func:`lmsim.encoding.encode_inputs` as fine-tuning encodes them
        (pairs with their segment ids; word lists with ``is_split_into_words``).
    kind : str, optional
        ``"token"`` reads word lists; default ``"token"`` for a token classifier, texts or
        pairs otherwise.
    batch_size, max_length, device, dtype, progress
        As in :func:`extract_moments`.
    paper_compat_padding : bool
        Record all positions, padding included, as the released RegMean code does: batches
        of ``batch_size`` texts in the given order, each padded to its longest text (its
        ``DataCollatorWithPadding``, ``padding=True``; ``local_trainer.compute_grams``
        hooks every position). ``max_length`` only truncates.

    Returns
    -------
    grams : dict of str to Moments
        Module name (as in ``model.named_modules()``) to a single-block Moments named
        ``"input"`` of width ``in_features``. Inputs that are not per-token, e.g. a
        classification head on the pooled ``(batch, d)`` vector, contribute one row per
        text.
    """
    from transformers.pytorch_utils import Conv1D

    if kind is None and model_kind(model) == "token":
        kind = "token"
    if input_form(texts, kind) == "text":
        texts = _check_texts(texts, "mean")
    device = resolve_device(device)
    amp_dtype = autocast_dtype(device, dtype)
    (run,) = _prepare({"model": (model, tokenizer)}, "last", max_length, device, dtype)
    enc = encode_inputs(tokenizer, texts, run.max_length, kind)
    linears = {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, (nn.Linear, Conv1D))
    }
    if not linears:
        raise ValueError(f"{type(model).__name__} has no nn.Linear or Conv1D layers")
    grams: dict[str, Moments] = {}
    state: dict[str, torch.Tensor] = {}

    def make_hook(name, module):
        width = module.in_features if isinstance(module, nn.Linear) else module.weight.shape[0]

        def hook(_module, args):
            x = args[0] if args else None
            if not isinstance(x, torch.Tensor):
                return
            mask = state["mask"]
            if x.ndim >= 3 and tuple(x.shape[:2]) == tuple(mask.shape) and not paper_compat_padding:
                x = x[mask.bool()]
            x = x.reshape(-1, width)
            if name not in grams:
                grams[name] = Moments({"input": width}, device=device)
            grams[name].update({"input": x.float()})

        return hook

    # The released code's batches keep their order (no sorting by length), and each is
    # padded to its longest text: padding enters its Grams, as much as those batches hold.
    sort = not paper_compat_padding
    lengths = np.array([len(x) for x in enc["input_ids"]], dtype=np.int64)
    batches = _batches(np.arange(len(texts)), lengths, int(batch_size), sort=sort)
    bar = _progress(len(texts), progress, "linear inputs")
    hooks = [(m, make_hook(n, m), "pre") for n, m in linears.items()]
    try:
        with scoped_hooks(hooks), torch.inference_mode():
            for batch in batches:
                inputs = model_inputs(model, pad_batch(enc, batch, run.pad_id), device)
                state["mask"] = inputs["attention_mask"]
                with _autocast(device, amp_dtype):
                    model(**inputs)
                bar.update(len(batch))
    finally:
        bar.close()
    return grams
