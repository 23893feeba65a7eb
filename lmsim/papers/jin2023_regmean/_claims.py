"""The RegMean page's claims: each paper statement with the estimate that tests it.

The page measures one paired difference per statement (:func:`paired_difference`, over the
test examples, fine-tuning seeds averaged) and hands them here by key; :func:`report_claims`
records each with its rule, the paper's numbers and the page's note, so the notebook's claim
check is one call. Statements the profile cannot test are listed in :data:`NOT_RUN`.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Tables 1-3, 6-8, Figs. 3-8.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lmsim.papers.jin2023_regmean._compare import SEEDS_UNIT


@dataclass(frozen=True)
class PaperClaim:
    """One statement: its text (``{setup}`` filled in per setup), rule and the paper's numbers."""

    text: str
    rule: str
    paper: str = "—"
    note: str = ""
    role: str = "paper"  # EVIDENCE.md §10: paper, beyond, method (prerequisites), contrast, control


# Keys the page's estimates are stored under; "{setup}" keys are per domain setup.
PAPER_CLAIMS: dict[str, PaperClaim] = {
    "individuals_learn": PaperClaim(
        "{setup}: the individual models beat their set's majority floor (they learn)",
        "> 0",
        note="a prerequisite of this page, not a paper claim",
        role="method",
    ),
    "domains_differ": PaperClaim(
        "{setup}: each domain's own model beats the other domains' models on its domain "
        "(the setup has domains)",
        "> 0",
        note="a prerequisite of the domain claims, not a paper claim",
        role="method",
    ),
    "table1_vs_avg": PaperClaim(
        "merging non-i.i.d. partition models (RegMean) beats the average individual (Table 1)",
        "> 0",
        "75.27 vs 71.76 (GLUE 8-task avg)",
    ),
    "table1_vs_simple": PaperClaim(
        "non-i.i.d.: RegMean beats simple averaging (Table 1)",
        "> 0",
        "75.27 vs 74.22",
    ),
    "fig3_drop": PaperClaim(
        "{setup}: a pairwise RegMean merge scores below the domain's own model (Fig. 3)",
        "< 0",
        "Fig. 3, same-head bars (the −12 % / −55 % in its text are the DH setting's)",
    ),
    "fig3_vs_simple": PaperClaim(
        "{setup}: pairwise RegMean merges beat simple averaging (Fig. 3)",
        "> 0",
        "Fig. 3, same-head bars (the −12 % / −55 % in its text are the DH setting's)",
    ),
    "fig3_vs_fisher": PaperClaim(
        "{setup}: pairwise RegMean merges beat Fisher averaging (Fig. 3)", "> 0", "Fig. 3"
    ),
    "fig3_dh_vs_simple": PaperClaim(
        "{setup}, different head initialisations: pairwise RegMean beats simple (Fig. 3, DH)",
        "> 0",
        "RoBERTa-base Emotion DH: −12 % vs −55 %",
    ),
    "table2_vs_simple": PaperClaim(
        "{setup}: merging all domain models, RegMean beats simple averaging in-domain (Table 2)",
        "> 0",
        "Emotion 38.73 vs 21.31; NER 85.68 vs 81.63",
    ),
    "table2_vs_fisher": PaperClaim(
        "{setup}: RegMean beats Fisher averaging in-domain (Table 2)",
        "> 0",
        "Emotion 38.73 vs 28.27; NER 85.68 vs 76.75",
    ),
    "table2_vs_ensemble": PaperClaim(
        "{setup}: RegMean beats the logit ensemble in-domain (Table 2)",
        "> 0",
        "Emotion 38.73 vs 27.21; NER 85.68 vs 85.45",
    ),
    "table2_vs_best": PaperClaim(
        "{setup}: RegMean beats the best individual (chosen on validation) in-domain (Table 2)",
        "> 0",
        "Emotion 38.73 vs 23.98 (NER: 85.68 vs 88.46, the other way)",
    ),
    "table2_below_mtl": PaperClaim(
        "{setup}: the RegMean merge stays below multi-task learning in-domain (Table 2)",
        "< 0",
        "Emotion 38.73 vs 47.75; NER 85.68 vs 90.41",
    ),
    "table3_vs_simple": PaperClaim(
        "{setup}: RegMean beats simple averaging out of domain (Table 3)",
        "> 0",
        "Emotion held-out 22.75 vs 11.17; CoNLL 78.27 vs 73.92",
    ),
    "table3_vs_best": PaperClaim(
        "{setup}: the best individual (chosen on in-domain validation) beats the RegMean merge "
        "out of domain (Table 3)",
        "< 0",
        "Emotion held-out 22.75 vs 30.06; CoNLL 78.27 vs 80.24",
    ),
    "beyond_ta": PaperClaim(
        "{setup}: RegMean beats task arithmetic in-domain (beyond the paper; λ on validation)",
        "> 0",
        note="task arithmetic (Ilharco et al. 2023) is not in the paper",
        role="beyond",
    ),
    "beyond_ties": PaperClaim(
        "{setup}: RegMean beats TIES in-domain (beyond the paper; λ on validation)",
        "> 0",
        note="TIES (Yadav et al. 2023) is not in the paper",
        role="beyond",
    ),
    "fig3_beyond_ta": PaperClaim(
        "{setup}: a pairwise RegMean merge beats pairwise task arithmetic (beyond the paper; "
        "λ on validation)",
        "> 0",
        note="task arithmetic (Ilharco et al. 2023) is not in the paper",
        role="beyond",
    ),
    "fig3_beyond_ties": PaperClaim(
        "{setup}: a pairwise RegMean merge beats pairwise TIES (beyond the paper; λ on validation)",
        "> 0",
        note="TIES (Yadav et al. 2023) is not in the paper",
        role="beyond",
    ),
    "table6_batches": PaperClaim(
        "more Gram batches give a better merge than one batch (Table 6)",
        "> 0",
        "in-domain 38.73 (1,000 batches) vs 37.42 (1 batch)",
    ),
    "table8_relative": PaperClaim(
        "relative scaling (α = 0.1) beats adding a constant γ to the diagonals (best γ on "
        "validation) (Table 8)",
        "> 0",
        "T5-base: 40.32 vs 39.13",
    ),
    "fig5_stable": PaperClaim(
        "RegMean is stable for α in [0.1, 0.9]: the 0.9 and 0.1 merges within 2 points (Fig. 5)",
        "within [-0.02, 0.02]",
        "stable between 0.1 and 0.9 (RoBERTa, DistilBERT)",
    ),
    "fig5_alpha_one": PaperClaim(
        "α = 1 (no regularisation) scores below α = 0.9 on pairwise merges (Fig. 5a)",
        "< 0",
        "drops at α = 1 for T5 and DeBERTa",
    ),
    "fig4_vs_simple": PaperClaim(
        "different tasks: pairwise RegMean merges beat simple averaging (Fig. 4)",
        "> 0",
        "RegMean best on most GLUE pairs",
    ),
    "fig6_subset": PaperClaim(
        "{setup}: a greedy merge of a subset (k >= 2 models, k chosen on OOD validation) "
        "beats merging all models out of domain (Fig. 6)",
        "> 0",
        "merging a subset is better than merging all (RoBERTa-base, same head)",
    ),
    "table7_top_pair": PaperClaim(
        "{setup}: merging the two individuals best on OOD validation gives a better OOD merge "
        "than the other pairs (Table 7)",
        "> 0",
        "TEC + ISEAR: 31.21, the best pair",
    ),
    "fig7_weights": PaperClaim(
        "{setup}: weight-based matching finds no permutation: each unit's nearest weight "
        "vector in the other model is its own (Fig. 7)",
        "> 0.9",
        "diagonal of M much smaller than the rest",
    ),
    "fig8_activations": PaperClaim(
        "{setup}: activation similarity is far from diagonal: most units' most similar unit "
        "in the other model is another (Fig. 8)",
        "< 0.5",
        "C far from diagonal",
    ),
}

NOT_RUN: dict[str, tuple[str, str]] = {
    "DeBERTa-large and T5-base (Fig. 5, Table 8's T5)": (
        "Tables 2-3, Fig. 3, 5, Table 8",
        "every profile fine-tunes one encoder family per page; T5 and DeBERTa are in none",
    ),
    "the paper's data sets (GLUE, five emotion collections, OntoNotes NER) and models "
    "(RoBERTa-base, DistilBERT)": (
        "Tables 1-3, Fig. 3-6",
        "offline profiles fine-tune one small encoder on the sets their parameters name; the "
        "paper profile (the Hugging Face hub and a GPU) runs RoBERTa-base and DistilBERT there",
    ),
}


# Claims measured outside any domain setup: a failed domain prerequisite leaves them testable.
NOT_DOMAIN_CLAIMS = ("table1_vs_avg", "table1_vs_simple", "fig4_vs_simple")
PREREQUISITES = ("individuals_learn", "domains_differ")
# App. D's permutation diagnostics compare two fine-tunes of one start unit by unit: they need
# models that moved, not models that beat a floor, so a failed prerequisite leaves them testable.
UNGATED = ("fig7_weights", "fig8_activations")


def learning_failures(checks: Mapping[str, Mapping], floor: float = 0.0) -> list[str]:
    """The domains whose own model does not clear its majority floor (the prerequisite).

    Parameters
    ----------
    checks : dict of domain -> dict
        :func:`learning_checks`'s result.
    floor : float
        The margin the pooled interval's low end must clear (the claim's rule ``> floor``).

    Returns
    -------
    list of str
        ``"<domain>: <difference> [<low>, <high>], per seed <values>"`` for each failing
        domain (empty when every domain's model learns).
    """
    out = []
    for d, check in checks.items():
        pooled = check["pooled"]
        if pooled.low > floor:
            continue
        each = ", ".join(f"{e.estimate:+.3f}" for e in check["per_seed"])
        out.append(
            f"{d}: {pooled.estimate:+.3f} [{pooled.low:+.3f}, {pooled.high:+.3f}] over its "
            f"majority floor, per seed {each}"
        )
    return out


def report_claims(
    claims,
    estimates: Mapping[str, object],
    notes: Mapping[str, str] | None = None,
    *,
    paper_profile: bool = False,
    groups: Mapping[str, Mapping[str, object]] | None = None,
    untestable: Mapping[str, str] | None = None,
    focus_setup: str | None = None,
):
    """Record every measured paper claim, then the ones this profile does not run.

    Parameters
    ----------
    claims : lmsim.claims.Claims
    estimates : dict of str to Estimate
        Keyed ``"<claim key>"`` or ``"<claim key>:<setup>"`` (:data:`PAPER_CLAIMS`; a
        per-domain prerequisite ``"individuals_learn:<setup>/<domain>"``); keys without an
        estimate are skipped.
    notes : dict of str to str, optional
        Extra notes by the same keys (put before the claim's own). A note starting "first
        seed only" also marks the claim's text "(first seed only)".
    paper_profile : bool
        The paper profile runs the paper's data and models: that "not run" row is left out.
    groups : dict of str to dict of str to Estimate, optional
        Per key, the estimates of its groups (a prerequisite's seeds), judged by the same
        rule (:meth:`lmsim.claims.Claims.report`'s ``groups``).
    untestable : dict of str to str, optional
        Setup -> why its claims cannot be tested (a domain model that does not learn,
        :func:`learning_failures`). Every claim of that setup but the prerequisites is
        recorded "not testable here" with this reason, its estimate shown (App. D's
        :data:`UNGATED` diagnostics excepted); the claims without a setup suffix belong to
        ``focus_setup`` unless they are in :data:`NOT_DOMAIN_CLAIMS`.
    focus_setup : str, optional

    Returns
    -------
    lmsim.claims.Claims
    """
    notes, groups, untestable = dict(notes or {}), dict(groups or {}), dict(untestable or {})
    for key, estimate in estimates.items():
        base, _, setup = key.partition(":")
        spec = PAPER_CLAIMS[base]
        # The seeds first: a landing table shows a note's first sentence only.
        note = "; ".join(n for n in (notes.get(key, ""), spec.note) if n)
        text = spec.text.format(setup=setup)
        if notes.get(key, "").startswith("first seed only"):
            text += " (first seed only)"
        owner = setup.partition("/")[0] or (focus_setup if base not in NOT_DOMAIN_CLAIMS else "")
        if base not in PREREQUISITES + UNGATED and owner in untestable:
            claims.not_testable(
                text,
                f"needs models that learn: {untestable[owner]}; {note}",
                paper=spec.paper,
                measured=estimate,
                role=spec.role,
            )
            continue
        claims.report(
            text,
            estimate=estimate,
            rule=spec.rule,
            paper=spec.paper,
            note=note,
            role=spec.role,
            **({"groups": groups[key], "pooled": "fine-tuning seeds"} if key in groups else {}),
        )
    for text, (paper, note) in NOT_RUN.items():
        if paper_profile and text.startswith("the paper's data sets"):
            continue
        claims.not_run(text, paper=paper, note=note, role="paper")
    return claims


def seed_notes(estimates: Mapping[str, object]) -> dict[str, str]:
    """The note on each estimate's seeds: how many its interval varies over and the difference
    at each (so a reader sees whether an inconclusive one has one sign at every seed), or
    "first seed only".

    Parameters
    ----------
    estimates : dict of str to Estimate
        As passed to :func:`report_claims`; an estimate whose ``unit`` ends in
        :data:`SEEDS_UNIT` came from :func:`paired_difference` with ``n_seeds`` (``values``: one per seed).

    Returns
    -------
    dict of str to str
    """
    notes = {}
    for key, estimate in estimates.items():
        if estimate.unit.endswith(SEEDS_UNIT):
            per_seed = ", ".join(f"{v:+.3f}" for v in estimate.values)
            notes[key] = (
                f"{len(estimate.values)} seeds, per seed {per_seed}; the interval varies the "
                f"test examples and the {SEEDS_UNIT}"
            )
        else:
            notes[key] = f"first seed only; the spread over {SEEDS_UNIT} is not measured"
    return notes


def identity_checks(claims, lab, scorer, pair: Sequence[str], names: Sequence[str], task, seed=0):
    """Assert the identities every profile must satisfy, on the page's models and Grams.

    Merging a model with itself returns it; with identical Grams RegMean is simple
    averaging; for linear models RegMean is least squares on the pooled inputs (Eq. 1-2);
    α = 0 weights each input feature by its Gram diagonal; the merge report names every
    parameter; the paired intervals' statistic reproduces the scorer's score.

    Parameters
    ----------
    claims : lmsim.claims.Claims
    lab : MergeLab
    scorer : Scorer
    pair : two model names
        Two models of one task (with Grams).
    names : sequence of str
        Models merged together for the report check.
    task : Task
        ``pair[0]``'s task.
    seed : int
    """
    import torch

    from lmsim.merge import merge_models, regmean_linear
    from lmsim.papers.jin2023_regmean._compare import side_scores

    def gap(m1, m2):
        return max((p - q).abs().max().item() for p, q in zip(m1.parameters(), m2.parameters()))

    a, grams_a = lab.models[pair[0]], lab.grams(pair[0])
    self_merge = merge_models([a, a], grams=[grams_a] * 2, alpha=lab.alpha)[0]
    g = gap(self_merge, a)
    claims.sanity("merging a model with itself returns the model", g < 1e-5, f"max |Δθ| = {g:.1e}")
    models = [lab.models[n] for n in pair]
    same = merge_models(models, grams=[grams_a] * 2, alpha=lab.alpha)[0]
    g = gap(same, lab.merge(pair, "simple"))
    claims.sanity(
        "with identical Grams RegMean equals simple averaging", g < 1e-5, f"max |Δθ| = {g:.1e}"
    )
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(50, 8)) * rng.uniform(0.2, 3, size=8) for _ in range(3)]
    ws = [rng.normal(size=(4, 8)) for _ in range(3)]
    target = np.vstack([x @ w.T for x, w in zip(xs, ws)])
    lstsq = np.linalg.lstsq(np.vstack(xs), target, rcond=None)[0].T
    g = np.abs(regmean_linear(ws, [x.T @ x for x in xs]) - lstsq).max()
    claims.sanity(
        "linear models: RegMean equals least squares on the pooled inputs",
        g < 1e-9,
        f"max |ΔW| = {g:.1e}",
    )
    layer = next(iter(grams_a))
    wl = [dict(m.named_modules())[layer].weight.detach().double().numpy() for m in models]
    gl = [torch.as_tensor(lab.grams(n)[layer]).numpy() for n in pair]
    diag = np.stack([np.diag(x) for x in gl])
    expected = sum(w * d for w, d in zip(wl, diag)) / diag.sum(0)
    g = np.abs(regmean_linear(wl, gl, alpha=0.0) - expected).max()
    claims.sanity(
        "α = 0: each input feature's weights averaged with its Gram diagonal as weight",
        g < 1e-9,
        f"{layer}: max |ΔW| = {g:.1e}",
    )
    merged, report = merge_models(
        [lab.models[n] for n in names], grams=[lab.grams(n) for n in names], alpha=lab.alpha
    )
    n_named = len(list(merged.named_parameters(remove_duplicate=False)))
    report.check_complete(merged)
    claims.sanity(
        "the merge report accounts for every parameter",
        sum(report.counts().values()) == n_named,
        ", ".join(f"{v} {k}" for k, v in report.counts().items()) + f" of {n_named}",
    )
    ours = side_scores(scorer, [(pair[0], a)], [task])[0]
    theirs = scorer.score(a, task, name=pair[0])
    claims.sanity(
        "the paired intervals' statistic reproduces the table's score",
        abs(ours - theirs) < 1e-12,
        f"{ours:.4f} vs {theirs:.4f}",
    )
