"""How closely a quantity must agree when its page is executed again, elsewhere.

The tolerance is a property of the quantity, known where it is produced:

``exact``
    Counts, sizes and configuration: equal, digit for digit.
``fixed``
    Fixed inputs (pretrained models on fixed text, float64 statistics): equal to
    :data:`FIXED_RTOL` relative, or to an absolute floor (:data:`FIXED_ATOL`; identities'
    leftovers near zero get :data:`SANITY_ATOL`), since float32 forward passes on another
    CPU round differently in the last bits.
``trained``
    Resting on weights trained here (the zoo, fine-tunes, probes, towers): a model trained
    on another machine is another draw of its training, so the quantity may move by its
    seed spread (the range of the values over the seeds it was measured on) and no more;
    without a seed spread only its verdict is compared (and, in tables, only that the cell
    is there).
``run``
    Measures the run, not the result (wall times, throughput, the machine): not compared.

A printed number also agrees within one unit of its last printed digit (each side is
rounded by up to half a unit): :func:`printed_unit`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TOLERANCE_KINDS = ("exact", "fixed", "trained", "run")
FIXED_RTOL = 1e-6
FIXED_ATOL = 1e-9
# Identities that hold by construction leave float rounding behind (1 - CKA(x, x) of 2e-8
# on one machine, 4e-9 on another): judged against this absolute floor.
SANITY_ATOL = 1e-6
# Units of a record whose ``values`` are one value per training seed.
_SEED_UNIT = re.compile(r"\bseeds?\b", re.IGNORECASE)
TRAINED_SUBJECTS = ("zoo", "trained here")


@dataclass(frozen=True)
class Tolerance:
    """How closely a quantity must agree with its committed value.

    Attributes
    ----------
    kind : {"exact", "fixed", "trained", "run"}
    rtol, atol : float
        Relative tolerance and absolute floor (``fixed``).
    spread : float or None
        ``trained``: the seed spread the quantity may move by; None: only its verdict is
        compared.
    """

    kind: str
    rtol: float = 0.0
    atol: float = 0.0
    spread: float | None = None

    def __post_init__(self):
        if self.kind not in TOLERANCE_KINDS:
            raise ValueError(
                f"tolerance `kind` must be one of {TOLERANCE_KINDS}, got {self.kind!r}"
            )
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"tolerance `{name}` must be a finite number >= 0, got {value!r}")
        if self.spread is not None and not (math.isfinite(self.spread) and self.spread >= 0):
            raise ValueError(
                f"tolerance `spread` must be a finite number >= 0, got {self.spread!r}"
            )

    def record(self) -> dict:
        """The JSON-ready record a claim or a table carries."""
        out: dict = {"kind": self.kind}
        if self.kind == "fixed":
            out.update(rtol=self.rtol, atol=self.atol)
        if self.kind == "trained":
            out["spread"] = self.spread
        return out

    @classmethod
    def from_record(cls, record: Mapping) -> Tolerance:
        """The tolerance of a record written by :meth:`record`."""
        if not isinstance(record, Mapping) or "kind" not in record:
            raise ValueError(f"a tolerance record is a mapping with a `kind`, got {record!r}")
        spread = record.get("spread")
        return cls(
            str(record["kind"]),
            float(record.get("rtol", 0.0)),
            float(record.get("atol", 0.0)),
            None if spread is None else float(spread),
        )

    @property
    def judges_numbers(self) -> bool:
        """Whether the quantity's numbers are compared (else its verdict, or presence)."""
        return self.kind in ("exact", "fixed") or (
            self.kind == "trained" and self.spread is not None
        )

    def describe(self) -> str:
        """The tolerance as the ``--verify`` table shows it."""
        if self.kind == "exact":
            return "exact"
        if self.kind == "fixed":
            return f"rtol {self.rtol:g}, atol {self.atol:g}"
        if self.kind == "run":
            return "not compared (the run)"
        if self.spread is None:
            return "trained: verdict only"
        return f"trained: ±{self.spread:.3g} (seed spread)"

    def agrees(self, old: float, new: float, unit: float = 0.0) -> bool | None:
        """Whether ``new`` agrees with ``old``; None when the numbers are not judged.

        ``unit``: one unit of the last digit the numbers were printed with (0 for full
        floats): printed numbers may differ by that much through rounding alone.
        """
        if not self.judges_numbers:
            return None
        if math.isnan(old) or math.isnan(new):
            return math.isnan(old) and math.isnan(new)
        if math.isinf(old) or math.isinf(new):
            return old == new
        bound = max(self.rtol * max(abs(old), abs(new)), self.atol, self.spread or 0.0)
        return abs(old - new) <= bound + unit


def exact() -> Tolerance:
    """Counts, sizes, configuration: equal."""
    return Tolerance("exact")


def fixed(rtol: float = FIXED_RTOL, atol: float = FIXED_ATOL) -> Tolerance:
    """Fixed inputs: float64-tight (``rtol``, with the absolute floor ``atol``)."""
    return Tolerance("fixed", rtol, atol)


def trained(spread: float | None = None) -> Tolerance:
    """Resting on weights trained here: within the seed ``spread``, or verdict only."""
    return Tolerance("trained", spread=None if spread is None else float(spread))


def run() -> Tolerance:
    """Measures the run (time, throughput, machine): not compared."""
    return Tolerance("run")


def seed_spread(values: Sequence[float] | None, unit: str | None) -> float | None:
    """The range of per-seed ``values`` (a record's values over training seeds), else None."""
    if not values or len(values) < 2 or not unit or not _SEED_UNIT.search(unit):
        return None
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return max(finite) - min(finite) if len(finite) >= 2 else None


def default_tolerance(
    kind: str,
    subject: str | None,
    unit: str | None = None,
    values: Sequence[float] | None = None,
    trains: bool = False,
) -> Tolerance:
    """The tolerance a claim gets unless its page states one.

    ``trains``: the page trains what the claim rests on although its subject is a
    pretrained model (probes or fine-tunes on its features). A claim about the zoo or a
    model trained here, or marked ``trains``, is ``trained`` (its seed spread where its
    values are per seed); an exact count (``unit: "none"``) is ``exact``; an identity
    (``sanity``) is ``fixed`` with the absolute floor :data:`SANITY_ATOL`; the rest are
    statistics of fixed inputs, ``fixed``.
    """
    if trains or subject in TRAINED_SUBJECTS:
        return trained(seed_spread(values, unit))
    if kind == "sanity":
        return fixed(atol=SANITY_ATOL)
    if unit == "none":
        return exact()
    return fixed()


def printed_unit(text: str) -> float:
    """One unit of the last digit of a printed number (``"0.352"`` -> 0.001); 0 for an
    integer written without a decimal point (a count: not rounded)."""
    token = str(text).strip().replace(",", "")
    mantissa, _, exponent = token.lower().partition("e")
    if "." not in mantissa:
        return 0.0 if not exponent else 10.0 ** int(exponent)
    decimals = len(mantissa.split(".", 1)[1])
    return 10.0 ** (-decimals + (int(exponent) if exponent else 0))
