"""Linear probes on word-level activations: elastic-net logistic regression, as in NeuroX.

:func:`train_probe` trains a multinomial logistic regression ``softmax(W x + b)`` on
activations ``X (n_words, n_neurons)`` with Adam, minimising

    J(W, b) = (1/N) Σ_i CE(W x_i + b, y_i) + λ1 Σ|W| + λ2 ‖W‖_F

(FORMULAS §4: λ1 = λ2 = 1e-5, Adam lr 1e-3, 10 epochs, batch 128; the penalty is on the
weights, not the bias, and ``‖W‖_F`` is the Frobenius norm itself, not its square, as in
NeuroX's ``l2_penalty``). It runs on the GPU when one is present (``device="auto"``) and on
the CPU otherwise, in float32, seeded by one :class:`torch.Generator` (initialisation and
shuffling), so a CPU run is bit-for-bit reproducible.

Penalty scaling (``penalty_scaling``)
    NeuroX adds the full penalty ``λ1 Σ|W| + λ2 ‖W‖_F`` to the *mean* cross-entropy of every
    minibatch. This is sometimes read as "the regularisation grows with the number of
    batches per epoch"; it does not: every step's gradient is an unbiased estimate of
    ``∇J`` with the *mean* cross-entropy, so the optimum and the relative strength of the
    penalty do not depend on the batch count or on N (only the number of steps does).
    Its one inconsistency is the last, partial batch of each epoch: ``|b| < batch_size``
    samples get a full step, so their cross-entropy is over-weighted and the epoch's
    penalty is counted ``ceil(N / batch_size)`` instead of ``N / batch_size`` times.

    * ``"sample"`` (default): each sample carries its share of the penalty, the step loss
      is ``(1 / batch_size) Σ_{i∈b} [CE_i + λ1 Σ|W| + λ2 ‖W‖_F]``; summed over an epoch
      the gradients are exactly ``(N / batch_size) ∇J``, partial batch included. On full
      batches it is identical to NeuroX.
    * ``"neurox"``: step loss ``mean_{i∈b} CE_i + λ1 Σ|W| + λ2 ‖W‖_F`` on every batch.

    So the two coincide bit for bit when ``batch_size`` divides N and otherwise differ
    only through the last batch of each epoch (tested). NeuroX also never shuffles
    (``shuffle=False`` reproduces that) and trains under fp16 autocast on GPUs (not here).

Convergence
    By default the probe runs a fixed number of epochs, as NeuroX. ``tol`` makes ``epochs``
    a maximum: after every epoch the full training objective ``J`` is computed on all
    training rows, and training stops once it fell by less than ``tol`` (relative) in each
    of ``patience`` consecutive epochs; ``ProbeResult.converged`` and ``.stopping_rule``
    report it, ``.objective`` holds ``J`` per epoch and ``curves=True`` adds the accuracy
    of every split per epoch (train / dev curves).

Converged probes (``solver="lbfgs"``)
    Full-batch L-BFGS-B on the same ``J`` to first-order optimality (the projected
    gradient's largest entry at most ``gtol``; ``_lbfgs``), from ``W = 0``; the L1 term is
    exact (``W = P − N``, ``P, N >= 0``), so weights below the penalty's reach are exactly
    zero. :func:`tune_penalty` picks ``λ = λ1 = λ2`` on dev from a grid along the
    regularisation path (warm starts). NeuroX's 10-epoch Adam stays the default.

Baselines
    The majority-class baseline (most frequent training label) is always reported. With
    ``words_*`` given, a control task (Hewitt & Liang 2019) is trained with identical
    settings: every word *type* gets a label drawn once, with a seed, from the empirical
    training label distribution (:func:`control_labels`), and ``selectivity = accuracy −
    control accuracy`` per split.

Neuron rankings
    :func:`get_top_neurons` follows NeuroX: per class, neurons sorted by ``|W[c]|``
    descending are taken until their cumulative mass reaches ``percentage`` of the class's
    total (the neuron that crosses it included); the result is the union over classes.

The package, by concern: ``_train`` (:func:`train_probe`, :class:`ProbeResult`), ``_fit``
(the seeded Adam loop, the penalty, prediction), ``_baselines`` (:func:`control_labels`,
:func:`lexical_baseline`), ``_rankings`` (:func:`get_top_neurons`, :func:`neuron_ordering`),
``_words`` (:func:`word_activations`), ``_lbfgs`` (the L-BFGS-B solver), ``_tune``
(:func:`tune_penalty`).

References
----------
Dalvi et al. (2019), "What Is One Grain of Sand in the Desert?", AAAI (probe, elastic net,
weight-mass ranking); Hewitt & Liang (2019), "Designing and Interpreting Probes with
Control Tasks", EMNLP; Dalvi et al. (2020), EMNLP (the redundancy protocol).
"""

from lmsim.probe._baselines import control_labels, lexical_baseline
from lmsim.probe._fit import PENALTY_SCALINGS
from lmsim.probe._fit import _step_loss as _step_loss
from lmsim.probe._lbfgs import SOLVERS
from lmsim.probe._rankings import get_top_neurons, neuron_ordering
from lmsim.probe._train import SPLITS as SPLITS
from lmsim.probe._train import ProbeResult, train_probe
from lmsim.probe._tune import tune_penalty
from lmsim.probe._words import word_activations

__all__ = [
    "ProbeResult",
    "train_probe",
    "tune_penalty",
    "control_labels",
    "lexical_baseline",
    "get_top_neurons",
    "neuron_ordering",
    "word_activations",
    "PENALTY_SCALINGS",
    "SOLVERS",
]
