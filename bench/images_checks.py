"""What a ``dataio bench images`` run's rows say: the ratios checked against the issue's targets, the cost of
the per-sample checksums, ``num_workers="auto"`` against the best fixed thread count, the stage limits' modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataio.bench.images_report import COMPARISONS
from dataio.formats.dataset.sample_table import read_sample_table

EVAL_ROWS = {"standard_eval", "dataio_eval"}  # the rows in eval mode, set beside standard_eval


def is_turbo(name: str) -> bool:
    """dataio's rows decoding with libjpeg-turbo on local shards: those the stage limits apply to."""
    return name.startswith("dataio") and name not in ("dataio_dali_gpu", "dataio_remote", "dataio_remote_cached")


def limit_modes(loaders: tuple[str, ...]) -> list[bool]:
    """The modes (train True, eval False) whose stage limits the rows need."""
    turbo = [n for n in loaders if is_turbo(n)]
    return [train for train in (True, False) if any((n not in EVAL_ROWS) == train for n in turbo)]


def mean_megapixels(folder: Path, manifest: Any) -> float | None:
    """The images' mean size in megapixels, from the sample table."""
    table = read_sample_table(folder / manifest.sample_table)
    return float((table.width.astype(float) * table.height).mean() / 1e6) if len(table) else None


def checksum_cost(by_name: dict[str, dict], own_single: float, checksum_single: float) -> dict[str, Any]:
    """What the per-sample checksums cost: their share of dataio's single-thread per-image work (a
    CPU-time measure, steady on a shared machine), and the end-to-end throughput of the loader with
    them against without them (noisier: two timed runs)."""
    checked, unchecked = (by_name.get(n, {}).get("img_s") for n in ("dataio", "dataio_unchecked"))
    return {"us_per_image": 1e6 / checksum_single,
            "share_of_per_image_work": own_single / checksum_single,
            "throughput_cost": 1 - checked / unchecked if checked and unchecked else None}


def auto_check(by_name: dict[str, dict]) -> dict[str, Any] | None:
    """auto's throughput against the best fixed-thread dataio row within auto's budget (per round too),
    and against the best fixed row of all (counts past the budget oversubscribe the cores auto was given)."""
    auto = by_name.get("dataio_auto")
    fixed = {n: r for n, r in by_name.items() if n.startswith("dataio_t")}
    if auto is None or not fixed:
        return None
    budget = auto.get("stages", {}).get("threads", {}).get("max_threads") or max(int(n[8:]) for n in fixed)
    within = {n: r for n, r in fixed.items() if int(n[len("dataio_t"):]) <= budget} or fixed
    best = max(within, key=lambda n: within[n]["img_s"])
    overall = max(fixed, key=lambda n: fixed[n]["img_s"])
    ratio = auto["img_s"] / within[best]["img_s"]
    rounds = [a / max(f["round_img_s"][i] for f in within.values()) for i, a in enumerate(auto["round_img_s"])]
    return {"budget_threads": budget, "best_fixed": best, "best_fixed_img_s": within[best]["img_s"],
            "auto_img_s": auto["img_s"], "ratio": ratio, "round_ratios": rounds,
            "chosen_threads": auto.get("stages", {}).get("threads_per_round"),
            "best_fixed_overall": overall, "ratio_to_best_overall": auto["img_s"] / fixed[overall]["img_s"]}


def checks(by_name: dict[str, dict], limit: float) -> dict[str, dict[str, Any]]:
    ours = by_name.get("dataio", {}).get("img_s")
    dali = max((by_name[n]["img_s"] for n in ("dali_cpu", "dali_cpu_plain") if n in by_name), default=None)
    ours_eval = by_name.get("dataio_eval", {}).get("img_s")
    measured = {
        "vs_standard": ours / by_name["standard"]["img_s"] if ours and "standard" in by_name else None,
        "eval_vs_standard": (ours_eval / by_name["standard_eval"]["img_s"]
                             if ours_eval and "standard_eval" in by_name else None),
        "vs_dali_cpu": ours / dali if ours and dali else None,
        "of_machine_limit": ours / limit if ours else None,
    }
    dataset = by_name.get("shard_dataset", {}).get("img_s")
    if dataset and "standard" in by_name:  # the same transform and DataLoader: it must still beat (a)
        measured["shard_dataset_vs_standard"] = dataset / by_name["standard"]["img_s"]
    mixture = by_name.get("dataio_mixture", {}).get("img_s")
    if mixture and ours:  # the same images through three sources and through one, taken in turns
        measured["mixture_vs_single"] = mixture / ours
    gpu = by_name.get("dataio_dali_gpu", {}).get("img_s")
    if gpu:
        measured["dali_gpu_vs_turbo"] = gpu / ours if ours else None
    return {k: {"value": v, "row": COMPARISONS[k][0], "against": COMPARISONS[k][1]} for k, v in measured.items()}
