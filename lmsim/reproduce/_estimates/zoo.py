"""The zoo page: training every zoo model of a profile."""

from __future__ import annotations

from collections.abc import Mapping

from lmsim.reproduce._estimates._common import (
    _on_gpu,
)
from lmsim.reproduce._resources import (
    BASE_GPU,
    BASE_RAM,
    GB,
    Estimate,
    Machine,
    train_flops,
    training_bytes,
    zoo_shape,
)


def zoo_train(params: Mapping, machine: Machine) -> Estimate:
    """The zoo build: every listed model (and its parents) trained for the profile's
    steps; then a CKA map over ``n_sentences``."""
    from lmsim.zoo import MODELS, PROFILES

    prof = PROFILES[params["zoo_profile"]]
    est = Estimate("", knobs={"gpu": "zoo_profile", "ram": "n_sentences", "disk": "models"})
    names, todo = [], list(params["models"])
    while todo:  # the models and what they are built from
        name = todo.pop()
        if name not in names:
            names.append(name)
            parent = MODELS[name].parent
            if parent:
                todo.append(parent)
    mixed = prof.bf16
    dtype = "bfloat16" if mixed else "float32"
    for name in names:
        spec = MODELS[name]
        shape = zoo_shape(prof.name, spec.deep)
        tokens = prof.steps * prof.batch_size * prof.seq_len
        factor = {"electra": 1.5, "distil": 4 / 3}.get(spec.objective, 1.0)
        if spec.objective == "finetune":
            tokens = (prof.max_ft_train or 2_000) * prof.seq_len * prof.ft_epochs
        est.seconds += (
            factor
            * train_flops(shape, tokens, prof.seq_len)
            / machine.flops_per_s(dtype, training=True)
        )
        est.disk_output += 4.0 * shape.params * 4  # weights + AdamW checkpoint (3x)
        need = factor * training_bytes(shape, prof.batch_size, prof.seq_len, mixed)
        if _on_gpu(params, machine):
            est.peak("gpu", BASE_GPU + need, f"training {name}: AdamW state and activations")
        else:  # no CUDA context on the CPU
            est.peak("ram", BASE_RAM + need, f"training {name} on the CPU")
    est.peak("ram", BASE_RAM + 0.5 * GB, "training data (PTB lines) and one model")
    est.notes.append(
        f"time: {len(names)} models x {prof.steps:,} steps of {prof.batch_size} x {prof.seq_len}"
    )
    return est
