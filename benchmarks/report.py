"""Generate ``docs/results.md`` from the benchmarks' outputs (never typed by hand).

Reads ``benchmarks/results/<bench>.json`` (the full runs; ``<bench>_quick.json`` stands in, and
says so, when only a quick run exists), and writes one
section per paper: the figures measured here beside the paper's numbers or the issue's targets,
then how honest the figures of ``thrifty compare`` are.

    python benchmarks/report.py [--out docs/results.md]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROOT = HERE.parent

# Per benchmark: the paper it reproduces, the command, and for each figure its label, the
# paper's number or the target ("" when neither), and how to read it. What differs from the
# paper's setting is said once per section.
SECTIONS = [
    {
        "bench": "runtime",
        "title": "Runtime (the core)",
        "paper": "",
        "command": "python benchmarks/runtime.py",
        "figures": [
            ("ratio_vs_lightgbm", "thrifty predict_raw time / LightGBM predict, 1 thread", "<= 1"),
            ("ratio_vs_lightgbm_all_cores", "the same, all cores", "<= 1"),
            ("ratio_vs_sklearn", "thrifty / scikit-learn random forest predict_proba", "<= 1"),
            ("cost_accounting_overhead", "evaluate with costs / predict_raw", ""),
            ("lazy_overhead", "lazy provider / dense evaluate", ""),
            ("big_batch_seconds", "seconds for the big batch", ""),
            ("big_batch_working_mb", "working memory of the 10-million-row batch, MB", "bounded"),
            (
                "compiled_ratio_vs_lightgbm",
                "thrifty.compile'd Full plan, evaluate with costs / LightGBM predict, 1 thread",
                "<= 0.12",
            ),
            ("compiled_ratio_vs_tl2cgen", "the same / tl2cgen (quantize=1)", "<= 0.4"),
            (
                "xgboost_compiled_ratio_vs_xgboost",
                "compiled XGBoost model (500 trees, depth 6) / XGBoost predict",
                "",
            ),
            (
                "single_row_ratio_vs_lightgbm",
                "one row per call: compiled evaluate / LightGBM predict",
                "<= 0.2",
            ),
            (
                "qwyc_single_row_ratio_vs_lightgbm",
                "one row per call: compiled QWYC plan / LightGBM's full predict",
                "<= 0.05",
            ),
            (
                "qwyc_compiled_speedup_efficiency",
                "compiled QWYC speed-up over compiled Full / tree reduction",
                ">= 0.9",
            ),
            ("compile_seconds", "seconds to compile the 500 trees (cold, all cores)", ""),
            (
                "compile_seconds_1000_trees",
                "seconds to compile a 1,000-tree model of 32 leaves (cold, all cores)",
                "<= 30",
            ),
            ("compiled_blocks", "the blocks this CPU compiles to", ""),
            ("cache_load_seconds", "seconds to load the compiled plan in a new process", "<= 1"),
            ("load_average", "the machine's 1-minute load average at the end of the run", ""),
        ],
        "differs": "Adult, a 500-tree LightGBM model of depth 5; ratios measured in one run on a shared "
        "2-core machine.",
    },
    {
        "bench": "shapes",
        "title": "Compiled speed across model shapes (issue 29)",
        "paper": "",
        "command": "python benchmarks/shapes.py (lleaves from its own environment: benchmarks/_lleaves.py)",
        "figures": [
            ("adult_batch_vs_lleaves", "Adult (500 x 32 leaves): thrifty / lleaves, batch", "<= 0.5"),
            ("adult_one_row_vs_lleaves", "the same, one row per call", "<= 0.5"),
            ("adult_fastest", "thrifty the fastest engine, batch and one row", "true"),
            (
                "higgs255_batch_vs_lleaves",
                "higgs_small (500 x 255 leaves): thrifty / lleaves, batch",
                "<= 0.35",
            ),
            ("higgs255_one_row_vs_lleaves", "the same, one row per call", "<= 0.5"),
            ("higgs255_fastest", "thrifty the fastest engine, batch and one row", "true"),
            (
                "rank300_batch_vs_lleaves",
                "rank_small ranker (300 features): thrifty / lleaves, batch",
                "<= 0.4",
            ),
            ("rank300_one_row_vs_lleaves", "the same, one row per call", "<= 0.5"),
            ("rank300_fastest", "thrifty the fastest engine, batch and one row", "true"),
            (
                "synth136_batch_vs_lleaves",
                "synthetic (1,000 x 31 leaves, 136 features): thrifty / lleaves",
                "",
            ),
            ("synth136_one_row_vs_lleaves", "the same, one row per call", "<= 0.5"),
            ("synth136_fastest", "thrifty the fastest engine, batch and one row", "true"),
            ("native_plans", "QWYC and Cronus plans on the ranker run natively", "true"),
            ("avx2_vs_avx512_per_row", "AVX2 code / AVX-512 code, one row", "<= 1.5"),
            (
                "peer_worst_vs_lleaves",
                "lleaves' NYC_taxi, airline, mtpl2 at 1 to 10,000 rows: worst thrifty / lleaves",
                "<= 1",
            ),
            ("load_average", "the machine's 1-minute load average at the end of the run", ""),
        ],
        "differs": "One thread, every engine timed in turn in one process on the same float64 matrix; "
        "lleaves' entry point is called directly (its best case); tl2cgen with quantize=1. "
        "Raw times, exactness (max abs difference from LightGBM) and each forced block kind are "
        "in results/shapes.json. lleaves needs llvmlite < 0.45, so it compiles in an environment of "
        "its own, set up once with `python3.11 -m venv ~/.cache/thrifty-bench/lleaves-env && "
        "~/.cache/thrifty-bench/lleaves-env/bin/pip install lleaves 'llvmlite<0.45'` (or "
        "LLEAVES_PYTHON=path/to/python); its object files are loaded into the benchmark's process. "
        "Without that environment lleaves' figures are null. `--prepare` fills the compile caches "
        "(untimed) before a quiet run.",
    },
    {
        "bench": "qwyc",
        "title": "QWYC (Wang, Gupta et al., 'Quit When You Can')",
        "paper": "qwyc_quit_when_you_can.txt",
        "command": "python benchmarks/qwyc.py",
        "figures": [
            (
                "adult_mean_models_at_0.5pct",
                "Adult: mean trees evaluated at 0.5% test difference (QWYC*)",
                "",
            ),
            ("adult_qwyc_beats_all", "QWYC* needs the fewest trees of all methods at 0.5%", "true"),
            ("adult_speedup_wall", "wall-clock speed-up over the full model, 1 thread", ">= 8"),
            (
                "speedup_vs_lightgbm_early_stop",
                "speed-up over LightGBM's pred_early_stop at equal test difference",
                ">= 1.5",
            ),
            ("speedup_efficiency", "speed-up / (trees saved ratio)", ">= 0.8"),
            ("fit_seconds_adult", "QWYC* fit seconds on Adult", "<= 20"),
        ],
        "differs": "Adult as in the paper's Experiment 1 (500 trees of depth 5); higgs_small and "
        "miniboone_tiny are small subsets, too small for exits fitted on them to generalise.",
    },
]
SECTIONS += [
    {
        "bench": "cegb",
        "title": "CEGB and GreedyMiser (Peter et al., 'Cost efficient gradient boosting')",
        "paper": "cegb_cost_efficient_gradient_boosting.txt",
        "command": "python benchmarks/cegb.py",
        "figures": [
            (
                "datasets_cegb_dominates_greedymiser",
                "datasets where CEGB's frontier lies above GreedyMiser's (area between the curves)",
                ">= 5 of 6",
            ),
            ("area_cegb_minus_greedymiser", "area between CEGB's and GreedyMiser's curves", ""),
            (
                "cost_fraction_at_full_accuracy",
                "CEGB's lowest mean cost within 0.5 points of plain LightGBM / LightGBM's cost",
                "<= 0.5 on >= 3 datasets",
            ),
            ("fit_time_ratio", "one CEGB fit / one plain LightGBM fit", "<= 1.5"),
            ("budget_search_fits", "median fits of a budget search", "<= 8"),
        ],
        "derived": [
            (
                "datasets with cost fraction <= 0.5 (rank_small's two settings count once)",
                lambda f: len(
                    {
                        k.split("_eval")[0].split("_feat")[0]
                        for k, v in f.get("cost_fraction_at_full_accuracy", {}).items()
                        if v is not None and v <= 0.5
                    }
                ),
                ">= 3",
            )
        ],
        "differs": "rank_small (Yahoo! LTR subset, 300 costs drawn from yahoo_costs, seed 0) in the "
        "paper's two settings; miniboone_tiny, higgs_small, adult with uniform costs; "
        "thyroid and heart (cross-validated) with real costs; 100 trees and 5 budgets per "
        "method. The paper's datasets are larger (full Yahoo! LTR, MiniBooNE, Forest, HEPMASS).",
    },
    {
        "bench": "budgetprune",
        "title": "BudgetRF and BudgetPrune (Nan, Wang, Saligrama, "
        "'Pruning random forests for prediction on a budget')",
        "paper": "budgetprune_optimally_pruning_ensembles.txt",
        "command": "python benchmarks/budgetprune.py",
        "figures": [
            (
                "ensemble_beats_individual",
                "datasets where ensemble pruning costs less than individual "
                "pruning at matched error (mean over the paths' common error range)",
                "every dataset",
            ),
            (
                "ensemble_cheaper_at_both_table_levels",
                "the same at the table's two error levels only "
                "(one grid point each; see the benchmark's docstring)",
                "",
            ),
            (
                "heart_cost_fraction_low",
                "heart: cost of ensemble pruning at the low error level / unpruned (paper: 0.73)",
                "<= 0.75",
            ),
            ("heart_error_low_minus_unpruned", "its error minus the unpruned error", "<= 0.005"),
            ("solver_speedup_vs_lp", "HiGHS time / min-cut time on the same (IP3) instance", ">= 100"),
            (
                "solver_lp_hit_time_limit",
                "HiGHS stopped at its time limit (the speed-up is then a lower bound)",
                "",
            ),
            ("path_seconds", "full lambda path, 40 trees, 45,000 x 50 synthetic rows", "<= 30"),
        ],
        "differs": "sonar and heart with 10-fold cross-validation and 90 BudgetRF trees, "
        "miniboone_tiny (40 trees) instead of the full MiniBooNE, heart and thyroid also "
        "with their real costs; errors counted out of bag as in the authors' code.",
    },
]
SECTIONS += [
    {
        "bench": "cronus",
        "title": "Cronus (Chen et al., 'Classifier cascade for minimizing feature evaluation cost')",
        "paper": "cronus_classifier_cascade.txt",
        "command": "python benchmarks/cronus.py",
        "figures": [
            (
                "cost_reduction_at_1pct",
                "rank_small: full GBRT's mean cost / Cronus's lowest cost "
                "within 1% (relative) of its precision@5 (paper: about an order of magnitude)",
                ">= 5",
            ),
            (
                "cronus_beats_early_exit",
                "datasets where Cronus's frontier lies above early exit's",
                "rank_small, adult, higgs_small",
            ),
            (
                "cronus_beats_single_stage",
                "datasets where it lies above single-stage re-weighting",
                "rank_small, adult, higgs_small",
            ),
            ("frontier_gaps", "mean gaps between the frontiers (log cost)", ""),
            (
                "smallest_lam_rejection",
                "the cascade with the smallest lam: share of test inputs "
                "rejected before its last stage (labelled negative), positives among them, its "
                "accuracy and the full model's",
                "",
            ),
            ("fit_seconds", "Cronus fit seconds, 1,000 trees and 50,000 rows", "<= 300"),
        ],
        "differs": "rank_small (50 test queries, relevance >= 3 is relevant, 300 costs drawn from "
        "yahoo_costs, negatives replicated 10x, a 1,000-tree LightGBM GBRT) instead of the "
        "full Yahoo! LTR set; adult and higgs_small with uniform feature costs and a unit "
        "tree cost, higgs_small by 5-fold cross-validation over its 7,500 rows (its 500 "
        "test rows alone give +-2 points); rho fixed at 1e-3 rather than cross-validated. "
        "On balanced higgs_small the paper's reject-only cascade labels every early "
        "reject negative and loses to the margin early exit, which stops on both sides "
        "(docs/methods/cronus.md).",
    },
]
SECTIONS += [
    {
        "bench": "adapt",
        "title": "ADAPT (Nan and Saligrama, 'Adaptive classification for prediction under a budget')",
        "paper": "adapt_adaptive_classification_budget.txt",
        "command": "python benchmarks/adapt.py",
        "figures": [
            (
                "letter_cost_reduction_within_1pt",
                "letter: 1 - ADAPT-GBRT's lowest mean cost within 1 "
                "point of f0's accuracy / f0's cost (paper: 0.31)",
                ">= 0.31",
            ),
            (
                "datasets_gbrt_beats_lin_and_l1",
                "(dataset, f0) pairs where ADAPT-GBRT's frontier lies above ADAPT-LIN's and L1's",
                "every pair",
            ),
            ("n_dataset_f0_pairs", "(dataset, f0) pairs run", ""),
            ("fit_seconds_letter", "ADAPT-GBRT fit seconds on letter", ""),
        ],
        "differs": "letter binarised A-M vs N-Z as in the authors' code (12,000/4,000/4,000), "
        "miniboone_tiny, higgs_small, heart and thyroid with real costs; f0 a 500-tree "
        "random forest and a LightGBM model; ADAPT-GBRT with 100 rounds of depth-4 trees "
        "and at most 6 alternations on a 4x4 (p_full, gamma) grid. Synthetic-2: ADAPT-LIN "
        "with gamma=1e-4, 50 alternations and max_features=1 is 100% accurate at the "
        "paper's cost 1.5, where the L1 baseline needs 1.75 (tests/train/"
        "test_adapt_synthetic.py; see docs/methods/adapt.md).",
    },
]
SECTIONS += [
    {
        "bench": "serve",
        "title": "`thrifty serve` under load (loopback)",
        "paper": "",
        "command": "python benchmarks/serve.py",
        "figures": [
            ("full_sequential_p50_ms", "Full plan, 1 client: median latency, ms", ""),
            ("full_sequential_p99_ms", "Full plan, 1 client: p99 latency, ms", ""),
            ("full_8_clients_rps", "Full plan, 8 clients: requests per second", ""),
            ("qwyc_sequential_p50_ms", "QWYC plan, 1 client: median latency, ms", ""),
            ("qwyc_sequential_p99_ms", "QWYC plan, 1 client: p99 latency, ms", ""),
            ("qwyc_8_clients_rps", "QWYC plan, 8 clients: requests per second", ""),
            ("full_mean_features_cost", "Full plan: features fetched per request", ""),
            ("qwyc_mean_features_cost", "QWYC plan: features fetched per request", ""),
        ],
        "differs": "Adult, a 500-tree LightGBM model; one row per request, every feature fetched lazily "
        "from a SQLite store of the 16,281 test rows; client and server on one shared 2-core "
        "machine.",
    },
    {
        "bench": "serve_faults",
        "title": "`thrifty serve` under hostile clients (loopback)",
        "paper": "",
        "command": "python benchmarks/serve_faults.py",
        "figures": [],
        "derived": [
            (
                "/health p99 with 200 idle and 40 stalled connections, ms",
                lambda f: f["attacked"]["health"]["p99_ms"],
                "<= 100",
            ),
            ("/health max with them, ms", lambda f: f["attacked"]["health"]["max_ms"], "<= 100"),
            ("/health p99 without them, ms", lambda f: f["baseline"]["health"]["p99_ms"], ""),
            (
                "good requests answered 200 with them, of all",
                lambda f: (
                    f"{f['attacked']['good']['statuses'].get('200', 0)} of "
                    f"{f['attacked']['good']['requests']}"
                ),
                "all",
            ),
            ("a burst of 100 requests: answered 200", lambda f: f["burst"]["ok"], "100"),
        ],
        "differs": "Issue 25's targets. A 100-tree LightGBM model on 20 synthetic features, every feature "
        "fetched lazily from SQLite; 32 clients, a prober process and the server on one shared 2-core "
        "machine, which the 32 clients saturate.",
    },
    {
        "bench": "scale_scoring",
        "title": "Scoring on a Dask cluster",
        "paper": "",
        "command": "python benchmarks/scale.py --only scoring",
        "figures": [],
        "derived": [
            (
                "cluster wall / single-process wall at the largest row count (`dask_overhead`)",
                lambda f: f["scoring"][-1]["dask_overhead"],
                "<= 1.3",
            ),
            ("rows scored at that count", lambda f: f["scoring"][-1]["rows"], ""),
            (
                "peak memory per worker, MiB, smallest and largest row counts",
                lambda f: (
                    f"{max(f['scoring'][0]['worker_peak_mib'])} and "
                    f"{max(f['scoring'][-1]['worker_peak_mib'])}"
                ),
                "bounded",
            ),
            ("cluster rows per second", lambda f: f["scoring"][-1]["cluster_rows_per_second"], ""),
        ],
        "differs": "Generated Adult-like rows; a local cluster of 2 single-threaded workers against "
        "one process with 2 threads, on the same 2-core machine. CEGB on the cluster and "
        "the compare sweep are in docs/scale.md.",
    },
]
SECTIONS += [
    {
        "bench": "tasks",
        "title": "Every task, every method: `thrifty compare` on regression, ranking, multiclass "
        "and 327k binary rows",
        "paper": "",
        "command": "python benchmarks/tasks.py",
        "figures": [
            ("methods_per_task", "methods with at least one model, per dataset", ""),
            ("min_methods_per_task", "fewest methods with a model on any task", ">= 8"),
            (
                "regression_budgets_above_baselines_frac",
                "diamonds: share of budgets where thrifty's best method beats both baselines "
                "(first k trees, cheapest k features) on test rows",
                "1 (every budget where they differ)",
            ),
            ("ranking_budgets_above_baselines_frac", "rank_small: the same", "1"),
            ("budgets_above_baselines_frac", "the same, per dataset", ""),
            (
                "budgets_above_baselines_frac_where_differ",
                "the same over the budgets where thrifty's test figure differs from the better "
                "baseline's (a tie is the same model)",
                "1",
            ),
            ("time_limit", "allowance of each dataset's compare run, s", ""),
            ("total_seconds", "the whole benchmark, wall seconds", "<= 1500 (25 minutes)"),
            ("full_metric_tolerance", "the plain model's metric counts as reached within", ""),
            ("cost_at_full_metric", "lowest test cost on the front reaching it, per dataset", ""),
            ("cost_fraction_at_full_metric", "that cost / the plain model's", ""),
            ("flights_compare_seconds", "`compare` on flights (327k rows), wall seconds", ""),
            ("flights_compare_within_allowance", "it ended within its allowance (+10%)", "true"),
            ("flights_compare_peak_gb", "its peak resident memory with its worker processes, GB", "< 4"),
        ],
        "differs": "Issue 24's targets. Each dataset's training rows go to `thrifty.compare` with its "
        "own test split as the test rows, every method that applies, one `compare` run per "
        "dataset within its allowance, default workers (every core), each method's own "
        "validation front confirmed on the test rows (`confirm_methods=True`): at each budget "
        "every method's choice (best validation figure within it) has a test figure "
        "(`results/tasks_choices.csv`, `tasks_choices_<dataset>.png`). Under the allowance the "
        "baselines run in full first, every other method's settings coarse to fine.",
    },
]
COMPARE = {"bench": "compare", "command": "python benchmarks/compare.py"}


def load_figures(bench: str) -> tuple[dict | None, bool]:
    for suffix, quick in (("", False), ("_quick", True)):
        path = RESULTS / f"{bench}{suffix}.json"
        if path.exists():
            return json.loads(path.read_text()), quick
    return None, False


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {fmt(v)}" for k, v in value.items())
    return "-" if value is None else str(value)


def section(spec: dict) -> list[str]:
    figures, quick = load_figures(spec["bench"])
    lines = [f"## {spec['title']}", ""]
    if spec["paper"]:
        lines += [f"Paper: `../shared/papers/{spec['paper']}`.", ""]
    if figures is None:
        return lines + [f"Not measured yet: run `{spec['command']}`.", ""]
    if quick:
        lines += [
            f"**Only a `--quick` run is recorded** (smaller settings than the targets refer to); "
            f"the full run is `{spec['command']}`.",
            "",
        ]
    lines += ["| figure | measured | paper / target |", "|---|---|---|"]
    for key, label, target in spec["figures"]:
        lines.append(f"| {label} (`{key}`) | {fmt(figures.get(key))} | {target or '-'} |")
    for label, derive, target in spec.get("derived", []):
        lines.append(f"| {label} (derived) | {fmt(derive(figures))} | {target or '-'} |")
    lines += ["", f"Setting: {spec['differs']}", f"Reproduce: `{spec['command']}`.", ""]
    lines += images(f"{spec['bench']}_*.png")
    return lines


def images(pattern: str) -> list[str]:
    """Markdown image links to the benchmark figures matching ``pattern`` (full runs only)."""
    found = sorted(p for p in RESULTS.glob(pattern) if "quick" not in p.name)
    out = [f"![{p.stem}](../benchmarks/results/{p.name})" for p in found]
    return out + [""] if out else []


def compare_section() -> list[str]:
    figures, quick = load_figures("compare")
    lines = ["## Is `thrifty compare` honest? Selected, confirmed and fresh figures", ""]
    if figures is None:
        return lines + [f"Not measured yet: run `{COMPARE['command']}`.", ""]
    if quick:
        lines += ["**Only a `--quick` run is recorded.**", ""]
    lines += [
        f"Time allowance per dataset: {figures.get('time_limit')} s. `compare` sees the "
        "training rows only; each recommended model is then scored on the dataset's own test "
        "split (a fresh re-draw). Optimism: the figure reported minus the fresh one, in "
        "points (target: at most 1). Coverage: the share of recommended models whose fresh "
        "accuracy lies in the 95% interval of the confirmed test figure.",
        "",
        "| dataset | optimism of the selected figure | optimism of the confirmed figure |",
        "|---|---|---|",
    ]
    confirmed = figures.get("confirmed_optimism", {})
    for name, points in figures.get("optimism", {}).items():
        lines.append(f"| {name} | {fmt(points)} | {fmt(confirmed.get(name))} |")
    lines += [
        "",
        f"Mean optimism: selected {fmt(figures.get('mean_optimism'))}, confirmed "
        f"{fmt(figures.get('mean_confirmed_optimism'))} points; coverage "
        f"{fmt(figures.get('coverage'))} over {figures.get('recommended_models')} recommended "
        "models.",
        "",
        f"Reproduce: `{COMPARE['command']}`; one row per recommended model in "
        "`benchmarks/results/compare.csv`.",
        "",
    ]
    lines += images("compare_*.png")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results.md")
    args = parser.parse_args()
    lines = [
        "# Results",
        "",
        "Generated by `python benchmarks/report.py` from `benchmarks/results/`; every number "
        "was measured on the machine that ran the benchmark (a shared 2-core machine), timings "
        "as ratios within one run.",
        "",
    ]
    for spec in SECTIONS:
        lines += section(spec)
    lines += compare_section()
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
