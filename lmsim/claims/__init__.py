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
inconclusive           the interval straddles the rule's threshold
not testable here      the page measured why it cannot tell (the models' reliability, a
                       power estimate): ``interval`` is null, the reason in ``note``
not run                not attempted under this profile: ``interval`` null, why in ``note``
=====================  ==================================================================

Rules: ``"> t"``, ``">= t"``, ``"< t"``, ``"<= t"`` (``t`` a number), ``"within [a, b]"``,
and ``"A > B"`` / ``"A < B"`` (the estimate is the difference A - B, judged against 0). A
count has no sampling variability: pass :func:`lmsim.stats.exact` (the interval
``[x, x]``, ``unit: "none"``).

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
"""

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
    judge,
    parse_rule,
)
from lmsim.claims._tables import (
    chapter_counts,
    collect,
    failing_markdown,
    overview_markdown,
    results_markdown,
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
    "failing_markdown",
    "overview_markdown",
]
