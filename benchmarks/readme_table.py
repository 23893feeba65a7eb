"""Print the README's table of CPU benchmark results from the JSONs in ``results/``.

One row per result: task, sizes, lmsim's time, the baseline's, their ratio, lmsim's
fraction of the machine's limit measured in the same run, threads, the 1-minute load
average before the run, and the command. Results without the standard header (older
runs, GPU runs) are listed by name at the end, unread.

Usage::

    python benchmarks/readme_table.py > /tmp/table.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _s(seconds: float) -> str:
    return f"{seconds:,.1f} s" if seconds >= 1 else f"{seconds * 1e3:,.0f} ms"


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 else f"{x:.1%}"


def _command(data: dict, script: str) -> str:
    if "command" in data:
        return data["command"]
    # bench_shard_order records its settings at the top level, not under "config"
    config = data.get("config") or {
        k: data[k] for k in ("model", "n_texts", "batch_size", "shard_size") if k in data
    }
    if "layouts" in data:
        config["repeats"] = len(data["layouts"]["length"]["times_s"])
    flags = [
        f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
        for k, v in config.items()
        if k not in ("out", "device", "seed", "chunk") and v is not None and v is not False
    ]
    if "threads" not in config:
        flags.append(f"--threads {data['threads']}")
    return " ".join(["python", f"benchmarks/{script}", *flags])


def _metrics(d):
    c = d["config"]
    return (
        "5 metrics × all layer pairs from one moments pass vs a per-pair numpy loop",
        f"{c['n_models']} × {c['n_layers']} × {c['width']}, {c['n_tokens']:,} tokens",
        _s(d["total_moments_s"]),
        _s(d["total_naive_s"]) + " (extrapolated)",
        d["total_naive_s"] / d["total_moments_s"],
        f"moments pass {_pct(d['accumulate_limit']['fraction_of_gemm_limit'])} (fp64)",
    )


def _lmd(d):
    c = d["config"]
    return (
        "LMD: 12 leave-one-out + 144 pairwise ridge fits from moments vs sklearn Ridge",
        f"{c['n_models']} × {c['width']}, {c['n_train']:,} / {c['n_test']:,} samples",
        _s(d["lmsim"]["best_s"]),
        _s(d["sklearn"]["seconds_all_fits"]) + " (extrapolated)",
        d["ratio_sklearn_over_lmsim"],
        f"{_pct(d['lmsim']['fraction_of_gemm_limit'])} (fp64); leave-one-out vs minimal "
        f"algebra {d['ratio_minimal_over_lmsim_leave_one_out']:.1f}×",
    )


def _moments(d):
    c = d["config"]
    return (
        "Moments.update (in-place dsyrk) vs full-GEMM Chan merge",
        f"{c['n_blocks']} × {c['width']}, {c['n_samples']:,} samples",
        _s(d["lmsim"]["best_s"]),
        _s(d["full_gemm"]["best_s"]),
        d["ratio_full_gemm_over_lmsim"],
        f"{_pct(d['lmsim']['fraction_of_gemm_limit'])} (fp64)",
    )


def _probe(d):
    s = d["sides"]
    return (
        "elastic-net probe, train_probe vs NeuroX's loop (per-sentence loop, saga)",
        f"{d['n_train']:,} words × {d['n_neurons']:,} neurons",
        _s(s["lmsim"]["seconds"]),
        _s(s["neurox"]["seconds"]),
        d["speedup_vs"]["neurox"],
        f"{_pct(s['lmsim']['fraction_of_gemm_limit'])} (fp32); per-sentence "
        + (f"{d['speedup_vs']['neurox_per_sentence']:.1f}×" if "neurox_per_sentence" in s else "-")
        + (f", saga {d['speedup_vs']['sklearn']:.1f}×" if "sklearn" in s else ""),
    )


def _cluster(d):
    return (
        "correlation clustering, cluster_neurons (stream) vs NeuroX corrcoef + scipy",
        f"{d['layers_x_width'][0]} × {d['layers_x_width'][1]} neurons, {d['n_tokens']:,} tokens",
        _s(d["lmsim"]["best_s"]),
        _s(d["neurox"]["best_s"]),
        d["speedup_total"],
        f"{_pct(d['lmsim']['fraction_of_gemm_limit'])} (fp64) of GEMM, "
        f"{_pct(d['lmsim']['fraction_of_bound'])} of the bound; peak memory "
        f"{d['memory_ratio']:.1f}× less",
    )


def _merge(d):
    c, lm, au = d["config"], d["runs"]["lmsim"], d["runs"]["authors"]
    err = lm["accuracy_vs_float64_reference"]["max_abs_error"]
    err_au = au["accuracy_vs_float64_reference"]["max_abs_error"]
    f32 = d["runs"].get("lmsim_f32")  # absent from files written before the option
    fast = (
        f"; float32 products {_s(f32['best_s'])}, "
        f"{_pct(f32['fraction_of_gemm_limit'])} of the fp64 GEMM limit, error "
        f"{f32['accuracy_vs_float64_reference']['max_abs_error']:.1e}"
        if f32
        else ""
    )
    return (
        "RegMean merge, streaming float64 vs the authors' float32 inverse",
        f"{c['n_models']} models × {c['layers']} layer(s) × {c['hidden']}",
        _s(lm["best_s"]),
        _s(au["best_s"]),
        d["ratio_time_authors_over_lmsim"],
        f"{_pct(lm['fraction_of_gemm_limit'])} (fp64); peak "
        f"{d['ratio_peak_above_imports_authors_over_lmsim']:.1f}× less; error {err:.1e} vs "
        f"{err_au:.1e}{fast}",
    )


def _threads(d):
    c, df, bf, pn = d["config"], d["default"], d["before"], d["pinned"]
    return (
        "tiny RegMean (collect_grams × 3 + merge_models) at default thread settings: "
        "thread policy (after) vs none (before)",
        f"{c['n_models']} BERT × {c['layers']} × {c['hidden']}, {c['n_texts']} PTB sentences each",
        _s(df["best_s"]),
        _s(bf["best_s"]) + " (before)",
        d["ratio_before_over_default"],
        f"{_pct(df['fraction_of_gemm_limit'])} (fp64) vs {_pct(bf['fraction_of_gemm_limit'])} "
        f"before; pinned lmsim.threads({d['threads']}) {_s(pn['best_s'])}, default / pinned "
        f"{d['ratio_default_over_pinned']:.2f}×",
    )


def _extract(d):
    return (
        "extract_moments vs one-sentence-at-a-time HF loop (tok/s)",
        f"{d['model']}, {d['n_texts']:,} PTB sentences, {d['n_tokens']:,} tokens",
        f"{d['lmsim_tokens_per_s']:,.0f} tok/s",
        f"{d['naive_tokens_per_s']:,.0f} tok/s",
        d["speedup"],
        f"MFU {_pct(d['lmsim']['fraction_of_gemm_limit'])} (fp32; bare forward "
        f"{_pct(d['forward']['fraction_of_gemm_limit'])}); padding "
        f"{_pct(d['padding_fraction'])}; overhead over the forward "
        f"{_pct(d['overhead_vs_forward'])}",
    )


def _shard_order(d):
    lay = d["layouts"]
    return (
        "extract_moments shards: global length order vs corpus pieces",
        f"{d['model']}, {d['n_texts']:,} PTB sentences",
        _s(lay["length"]["best_s"]),
        _s(lay["corpus"]["best_s"]),
        d["speedup_length_over_corpus"],
        f"no limit recorded; padding {_pct(lay['length']['padding']['fraction'])} vs "
        f"{_pct(lay['corpus']['padding']['fraction'])}",
    )


def _twotower(d):
    rows = d["results"]
    return (
        "two-tower phase-1 training, lmsim.training.train vs a bare AdamW loop",
        f"width {rows[0]['hidden']} × {rows[0]['layers']} layers, T = {d['seq_len']}, "
        f"batch {d['batch_size']}, {d['steps']} steps",
        ", ".join(f"{r['tower']} {r['lmsim_tokens_per_s']:,.0f}" for r in rows) + " tok/s",
        ", ".join(f"{r['tower']} {r['bare_tokens_per_s']:,.0f}" for r in rows) + " tok/s",
        ", ".join(f"{r['tower']} {1 / r['overhead_ratio']:.2f}×" for r in rows),
        ", ".join(f"{r['tower']} {_pct(r['lmsim']['fraction_of_gemm_limit'])}" for r in rows)
        + " (fp32)",
    )


def _floors(d):
    c = d["config"]
    widths = sorted(set(d["blocks"].values()))
    return (
        "chance floors of `lmsim similarity --moments` (5 measures, "
        f"{c['draws']} draws): moment form, shared draws vs the old raw-data floors",
        f"{len(d['blocks'])} blocks × {', '.join(map(str, widths))}, {d['n_words']:,} words",
        _s(d["floors_s_best"]),
        _s(d["old_floors_total_s"]),
        d["speedup_floors_old_over_new"],
        f"command with floors / without: **{d['ratio_with_over_without']:.2f}×** (goal ≤ 2); "
        f"floor sampling {_pct(d['sampling_limit']['fraction_of_gemm_limit'])} (fp64)",
    )


ROWS = {
    "metrics.json": ("bench_metrics.py", _metrics),
    "floors.json": ("bench_floors.py", _floors),
    "extract.json": ("bench_extract.py", _extract),
    "extract_shard_order.json": ("bench_shard_order.py", _shard_order),
    "lmd.json": ("bench_lmd.py", _lmd),
    "moments.json": ("bench_moments.py", _moments),
    "probe.json": ("bench_probe.py", _probe),
    "probe_9984.json": ("bench_probe.py", _probe),
    "cluster.json": ("bench_cluster.py", _cluster),
    "cluster_9984.json": ("bench_cluster.py", _cluster),
    "merge.json": ("bench_merge.py", _merge),
    "twotower.json": ("bench_twotower.py", _twotower),
    "threads.json": ("bench_threads.py", _threads),
    # the same scripts, earlier, at the committed sizes on the idle 16-core CPU of the GPU
    # machine
    "lmd_idle16.json": ("bench_lmd.py", _lmd),
    "metrics_idle16.json": ("bench_metrics.py", _metrics),
    "moments_idle16.json": ("bench_moments.py", _moments),
}


def table(results: Path = RESULTS) -> str:
    """The markdown table (and the list of results it leaves out)."""
    head = (
        "| result | task | sizes | lmsim | baseline | ratio (baseline / lmsim) | "
        "fraction of the limit (same run) | threads | load (1 min, before) | command |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    lines, skipped = [], []
    for path in sorted(results.glob("*.json")):
        if path.name not in ROWS:
            skipped.append(path.name)
            continue
        script, row = ROWS[path.name]
        data = json.loads(path.read_text())
        if "limits" not in data and path.name != "extract_shard_order.json":
            skipped.append(path.name)
            continue
        task, sizes, lm, base, ratio, frac = row(data)
        ratio = ratio if isinstance(ratio, str) else f"{ratio:.2f}×"
        load = data["load_average_before"][0]
        cmd = _command(data, script).replace("|", "\\|")
        lines.append(
            f"| `{path.name}` | {task} | {sizes} | {lm} | {base} | **{ratio}** | {frac} | "
            f"{data['threads']} | {load:.1f} | `{cmd}` |"
        )
    note = f"\nNot in the table (no same-run limits, or GPU): {', '.join(skipped)}.\n"
    return head + "\n".join(lines) + "\n" + note


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    print(table(args.results), end="")


if __name__ == "__main__":
    main()
