"""The record of a merge: how each parameter of the merged model was obtained."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn


@dataclass
class MergeReport:
    """How each parameter of a merged model was obtained.

    Attributes
    ----------
    method : str
        The method asked for (one of :data:`lmsim.merge.METHODS`).
    n_models : int
    entries : dict of str to (how, note)
        Every name of ``model.named_parameters(remove_duplicate=False)``. ``how`` is a
        method of :data:`lmsim.merge.METHODS`, ``"masked"`` (the head weight under
        ``head_rows``), ``"kept"`` (first model's value, not merged) or ``"tied"`` (an alias
        of another parameter, merged once under that name); ``note`` says why.
    """

    method: str
    n_models: int = 0
    entries: dict[str, tuple[str, str]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Number of parameters per ``how``."""
        out: dict[str, int] = {}
        for how, _ in self.entries.values():
            out[how] = out.get(how, 0) + 1
        return out

    def names(self, how: str) -> list[str]:
        """Parameter names merged by ``how``."""
        return [k for k, (h, _) in self.entries.items() if h == how]

    def to_frame(self):
        """A ``pandas.DataFrame`` with columns ``parameter``, ``how``, ``note``."""
        import pandas as pd

        return pd.DataFrame(
            [(k, h, n) for k, (h, n) in self.entries.items()],
            columns=["parameter", "how", "note"],
        )

    def check_complete(self, model: nn.Module) -> None:
        """Raise ``ValueError`` unless every parameter name of ``model`` is accounted for."""
        names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
        missing = [n for n in names if n not in self.entries]
        extra = [n for n in self.entries if n not in set(names)]
        if missing or extra:
            raise ValueError(f"report does not match the model: missing {missing}, extra {extra}")

    def __str__(self) -> str:
        counts = ", ".join(f"{v} {k}" for k, v in sorted(self.counts().items()))
        lines = [f"{self.method} merge of {self.n_models} models: {counts}"]
        for name, (how, note) in self.entries.items():
            if how in ("kept", "tied") or note:
                lines.append(f"  {name}: {how}" + (f" ({note})" if note else ""))
        return "\n".join(lines)
