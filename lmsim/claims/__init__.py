"""Claim records: what each page checked, with its estimate, interval, rule and verdict.

Every page separates its statements by *kind*:

``sanity``
    Identities that hold by construction (a layer's CKA with itself is 1). Asserted, so a
    bug fails the page, but never presented as a finding.
``asserted``
    Paper claims that must hold at every scale: the whole interval must lie on the
    claimed side of the rule, or the page fails with an ``AssertionError``.
``reported``
    Paper claims that may or may not hold at this profile's scale.
``not run``
    A paper claim this profile does not attempt (no model, no data offline), with why.

and gives each a *verdict*, derived from an :class:`lmsim.stats.Estimate` (an estimate
with its interval over a named resampling unit) and a *rule*:

=====================  ==================================================================
holds                  the interval lies on the claimed side of the rule
does not hold          the interval lies on the other side
heterogeneous          a pooled claim whose groups (or pooled value) include both "holds"
                       and "does not hold": ``groups`` names them
inconclusive           the interval straddles the rule's threshold; ``mde`` says what the
                       design could detect and what would settle it
not testable here      the page measured why it cannot tell (the models' reliability, a
                       power estimate): ``interval`` is null, the reason in ``note``
not run                not attempted under this profile: ``interval`` null, why in ``note``
=====================  ==================================================================

Rules: ``"> t"``, ``">= t"``, ``"< t"``, ``"<= t"`` (``t`` a number), ``"within [a, b]"``,
and ``"A > B"`` / ``"A < B"`` (the estimate is the difference A - B, judged against 0). A
count has no sampling variability: pass :func:`lmsim.stats.exact` (the interval
``[x, x]``, ``unit: "none"``). Equivalence rules are two one-sided tests: ``"within ±m"``,
``"stable within ±m"`` and ``"no worse than m"`` (``m%``: relative to ``reference=``) hold
only when the whole interval lies inside the margin.

Every record has a *role* (:data:`ROLES`): ``paper`` (the paper says it), ``beyond`` (our
question), ``method`` (a check that our method works; sanity identities), ``contrast`` (a
model the paper says nothing about) or ``control`` (the zoo or another control). Tallies
count ``paper`` claims; the others are listed in their own tables. The designs behind a
verdict are one keyword each (:meth:`Claims.report`): ``groups=`` (per-group verdicts of
a pooled claim), ``reference=`` (a relative margin), ``ceiling=`` with ``paper_value=``
(the symmetric ceiling rule), ``null=`` (:func:`lmsim.stats.pipeline_null`), and ``with
claims.family(name):`` (Holm's correction over a family). :func:`evidence_problems` is
what ``tests/test_claims_pages.py`` asks of every record of an executed page.

Claims about pretrained models are judged on real models (``subject="pretrained"``); the
zoo's result for the same statement is recorded beside it as a control
(``subject="zoo", control_of=<the claim>``) and counted apart.

A page collects its claims in a :class:`Claims` and shows it in its claim check; the
displayed output carries the records under :data:`MIME_TYPE` beside an HTML table that
fits the book's width. Pages open with what they found by pasting that output near the
top (:meth:`Claims.glue` and a ``{glue} claims`` directive). The landing pages are
generated from the executed pages (:func:`collect`, :func:`results_markdown`,
:func:`overview_markdown`), so they never drift from them. Pages executed before this
format (records with a boolean ``holds`` and no interval) are still read.

Each record also carries its *tolerance* (:class:`Tolerance`): how closely the same page
executed on another machine must reproduce it. ``exact`` for counts and configuration,
``fixed`` (float64-tight) for statistics of fixed inputs, ``trained`` for what rests on
weights trained here (within its seed spread, or its verdict only), ``run`` for what
measures the run. ``python -m lmsim.reproduce --verify`` judges each quantity by it.
"""

from lmsim.claims._display import verdict_details
from lmsim.claims._evidence import (
    ROLES,
    ceiling_verdict,
    combine_groups,
    effective_role,
    evidence_problems,
    group_summary,
)
from lmsim.claims._records import (
    GLUE_KEY,
    KINDS,
    MIME_TYPE,
    PAPER_KINDS,
    SUBJECTS,
    VERDICTS,
    Claim,
    Claims,
    claims_html,
)
from lmsim.claims._rules import judge, parse_rule
from lmsim.claims._tables import (
    SECTIONS,
    WITHDRAWN_TITLE,
    chapter_counts,
    chapter_markdown,
    collect,
    failing_markdown,
    overview_markdown,
    results_markdown,
    roles,
    withdrawn_markdown,
)
from lmsim.claims._tolerance import (
    FIXED_ATOL,
    FIXED_RTOL,
    SANITY_ATOL,
    TOLERANCE_KINDS,
    Tolerance,
    default_tolerance,
    exact,
    fixed,
    printed_unit,
    run,
    seed_spread,
    trained,
)

__all__ = [
    "MIME_TYPE",
    "GLUE_KEY",
    "KINDS",
    "PAPER_KINDS",
    "VERDICTS",
    "SUBJECTS",
    "Claim",
    "Claims",
    "claims_html",
    "parse_rule",
    "judge",
    "collect",
    "chapter_counts",
    "results_markdown",
    "withdrawn_markdown",
    "failing_markdown",
    "overview_markdown",
    "chapter_markdown",
    "SECTIONS",
    "WITHDRAWN_TITLE",
    "ROLES",
    "roles",
    "effective_role",
    "evidence_problems",
    "ceiling_verdict",
    "combine_groups",
    "group_summary",
    "verdict_details",
    "Tolerance",
    "TOLERANCE_KINDS",
    "FIXED_RTOL",
    "FIXED_ATOL",
    "SANITY_ATOL",
    "default_tolerance",
    "exact",
    "fixed",
    "trained",
    "run",
    "seed_spread",
    "printed_unit",
]
