"""The printed report of ``dataio bench images``: the rows, the machine limit, the stage tables, and the
ratios of dataio's rows to the others (``COMPARISONS``), in the words a user reads."""

from __future__ import annotations

from typing import Any

from dataio.bench import huffman_floor, stage_limits
from dataio.bench.report import format_table

# The ratios printed under the table: (this row, against that), in the words the report prints.
COMPARISONS = {
    "vs_standard": ("(d) dataio.ImageLoader", "(a) ImageFolder + PIL + DataLoader"),
    "eval_vs_standard": ("(d, eval) dataio.ImageLoader, train=False", "(a, eval) Resize + CenterCrop"),
    "vs_dali_cpu": ("(d) dataio.ImageLoader", "the faster DALI CPU pipeline, (c) or (c')"),
    "of_machine_limit": ("(d) dataio.ImageLoader", "the machine limit (full decode + crop-resize x cores)"),
    "shard_dataset_vs_standard": ("(h) dataio.ShardDataset", "(a), under the same transform and DataLoader"),
    "dali_gpu_vs_turbo": ("(e) dataio.ImageLoader, DALI on the GPU", "(d) dataio.ImageLoader, CPU threads"),
    "mixture_vs_single": ("(i) dataio.ImageLoader, a mixture of 3 sources", "(d), one source, over the same images"),
}
# dataio's loader stages, in the order of the stage table
STAGES = ("read", "decode", "resize", "plan", "decode_wait", "copy", "augment", "wait")


def render_stages(rows: list[dict[str, Any]]) -> list[str]:
    """The per-stage table of dataio's rows: microseconds per image (read, decode and resize are summed over
    the decode threads; the others are on the loader's thread; wait is the consumer's time in next()), then
    each decode-thread stage beside its single-thread limit (``stage_limits``)."""
    staged = [r for r in rows if "stages" in r]
    if not staged:
        return []
    table = [{"label": r["label"], **r["stages"]["us_per_image"]} for r in staged]
    columns = [("label", "dataio stages, us/image", "s")] + [(stage, stage, ",.0f") for stage in STAGES]
    clocks = {r["stages"].get("clock", "wall") for r in staged}
    unit = "CPU seconds" if clocks == {"cpu"} else "thread-seconds" if clocks == {"wall"} else "seconds"
    lines = [format_table(table, columns),
             f"(read, decode, resize: {unit} over the decode threads; the rest on the loader's thread"
             + ("; CPU seconds leave out the time a thread waits, so wait and decode_wait are its own work)"
                if "cpu" in clocks else ")")]
    limits = [(r["label"], r["stage_limits"]) for r in staged if "stage_limits" in r]
    return lines + stage_limits.render(limits) + huffman_floor.render(limits)


def _tier_words(m: dict[str, Any]) -> str:
    """The CPU's class and the crop-resize tier that ran, for the report's first line ("" in results from before
    the tiers; PIL's where PIL crop-resizes)."""
    if "cpu_tier" not in m:
        return ""
    if m["cpu_tier"] is None:
        return f" ({m['cpu_class']}), crop-resize PIL's (no tier)"
    capped = f" (capped below {m['cpu_tier_highest']})" if m["cpu_tier"] != m["cpu_tier_highest"] else ""
    return f" ({m['cpu_class']}), crop-resize tier {m['cpu_tier']}{capped}"


def render(result: dict[str, Any]) -> str:
    """The printed report: machine line, table, limit, and the ratios of dataio's rows to the others."""
    m = result["machine"]
    cfg = result["config"]
    load = result.get("load_average")
    size_kb = result.get("mean_image_kb")
    head = (f"dataio bench images, {result['date']}: {m['cpu']}{_tier_words(m)}, {m['cores']} cores, GPU: {m['gpu'] or 'none'}; "
            f"{result['num_images']} images" + (f" ({size_kb:,.0f} KB on average)" if size_kb else "")
            + f", batch {cfg['batch_size']}, {cfg['image_size']}px crops, "
            f"{cfg['num_workers']} workers, median of {cfg['epochs']} warm epochs"
            + (f" x {cfg['rounds']} rounds" if cfg.get("rounds", 1) > 1 else "")
            + (f"; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}" if load else ""))
    table = format_table(result["rows"], [("label", "loader", "s"), ("img_s", "img/s", ",.0f"),
                                          ("per_core", "img/s/core", ",.0f"), ("vs_standard", "vs (a)", ".2f"),
                                          ("cpu_us_per_image", "CPU us/img", ",.0f"),
                                          ("cpu_vs_standard", "CPU vs (a)", ".2f"),
                                          ("of_limit", "of limit", ".0%")])
    table += ("\n(eval rows are set beside (a, eval); CPU: the loader's threads, or a DataLoader's main and worker "
              "processes, per image: its ratio moves less with other processes' load than the rates')")
    lim = result["machine_limit"]
    lines = [head, table, f"machine limit: {lim['single_thread_img_s']:,.0f} img/s single-thread x {lim['cores']} "
             f"cores = {lim['img_s']:,.0f} img/s (full decode + crop-resize)"]
    own = lim.get("dataio_single_thread_img_s")
    ours = next((r["img_s"] for r in result["rows"] if r["loader"] == "dataio"), None)
    if own and ours:
        share = ours / (own * lim["cores"])
        lines.append(f"dataio's own path over the packed files (spliced region decode + crop-resize): {own:,.0f} img/s "
                     f"single-thread; the loader runs at {share:.0%} of that x {lim['cores']} cores")
    checksum = result.get("sample_checksum")
    if checksum:
        cost = checksum["throughput_cost"]
        lines.append(f"sample checksums (xxh3-64, checked on every read): {checksum['us_per_image']:.1f} us/image, "
                     f"{checksum['share_of_per_image_work']:.1%} of dataio's per-image work"
                     + (f"; throughput with them vs without: {-cost:+.1%}" if cost is not None else ""))
    lines += render_stages(result["rows"])
    auto = result.get("auto_threads")
    if auto:
        lines.append(f"num_workers=auto: {auto['auto_img_s']:,.0f} img/s, chose {auto['chosen_threads']} threads "
                     f"(budget {auto['budget_threads']}); best fixed within the budget {auto['best_fixed']} "
                     f"{auto['best_fixed_img_s']:,.0f} img/s: auto ran at {auto['ratio']:.3f}x its rate; rounds: "
                     + ", ".join(f"{r:.3f}" for r in auto["round_ratios"])
                     + (f"; against {auto['best_fixed_overall']}, past the budget: {auto['ratio_to_best_overall']:.3f}"
                        if auto["best_fixed_overall"] != auto["best_fixed"] else ""))
    rounds = result.get("round_checks") or []
    compared = [(name, check) for name, check in result["checks"].items() if check["value"] is not None]
    if compared:
        lines.append(f"compared on this machine ({m['cpu']}, {m['cores']} cores, GPU: {m['gpu'] or 'none'}), "
                     "images/s of one row over the other:")
    for name, check in compared:
        row, against = COMPARISONS[name]
        per_round = [r[name]["value"] for r in rounds if r.get(name, {}).get("value") is not None]
        spread = f" (rounds: {', '.join(f'{v:.2f}' for v in per_round)})" if per_round else ""
        lines.append(f"  {row} vs {against}: {check['value']:.2f}x{spread}")
    return "\n".join(lines)
