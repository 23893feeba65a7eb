"""Facts about a loaded model: size, causality, the longest input it accepts."""

from __future__ import annotations

from lmsim._runtime import architecture, text_config


def _is_causal(config) -> bool:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if getattr(config, "is_encoder_decoder", False):
        return False
    if getattr(config, "is_decoder", False):
        return True
    model_type = config.model_type
    # BERT-likes also register a causal-LM class; only decoder-only types lack a masked LM.
    return (
        model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    )


def model_info(model) -> dict:
    """Basic facts about a loaded model.

    Returns
    -------
    dict
        ``n_layers`` (transformer layers; ``output_hidden_states`` gives ``n_layers + 1``),
        ``hidden_size``, ``n_heads``, ``max_positions`` (``None`` when unbounded),
        ``is_causal`` (decoder-only), ``architecture`` (class name), ``model_type``,
        ``n_params``.
    """
    facts = architecture(model)
    return {
        "n_layers": facts["n_layers"],
        "hidden_size": facts["hidden_size"],
        "n_heads": facts["n_heads"],
        "max_positions": facts["max_positions"],
        "is_causal": _is_causal(text_config(model)),
        "architecture": facts["architecture"],
        "model_type": facts["model_type"],
        "n_params": sum(p.numel() for p in model.parameters()),
    }


def max_positions(model, tokenizer=None) -> int | None:
    """Longest input (in tokens, special tokens included) the model and tokenizer accept.

    The minimum of the model's position limit and the tokenizer's ``model_max_length``
    (ignored when it is the "unset" sentinel, > 1e6). ``None`` when neither sets a limit.
    """
    limits = []
    model_limit = model_info(model)["max_positions"]
    if model_limit:
        limits.append(int(model_limit))
    tok_limit = getattr(tokenizer, "model_max_length", None) if tokenizer is not None else None
    if tok_limit is not None and tok_limit < 1_000_000:
        limits.append(int(tok_limit))
    return min(limits) if limits else None


def check_seq_len(seq_len: int, model, tokenizer=None, name: str | None = None) -> int:
    """Return ``seq_len``, or raise a ``ValueError`` when it exceeds :func:`max_positions`."""
    limit = max_positions(model, tokenizer)
    if limit is not None and seq_len > limit:
        label = name or model_info(model)["architecture"]
        raise ValueError(
            f"`seq_len`={seq_len} exceeds the maximum of {limit} positions of {label}; "
            f"use seq_len <= {limit} or drop this model"
        )
    return seq_len
