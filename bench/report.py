"""Renders docs/benchmarks.md from the committed results (bench/results/<machine>/*.json).

  python bench/report.py            # rewrite docs/benchmarks.md
  python bench/report.py --check    # fail if docs/benchmarks.md is not what the results give
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "benchmarks.md"

COMMANDS = {
    "resnet50_train_step": "python bench/resnet50.py --chip nvgpu --native cuda --batch 64",
    "op_overhead": "python bench/op_overhead.py --pair {pairs}",
    "triton_kernels": "python bench/triton_kernels.py",
    "allocator": "python bench/allocator.py --chip {chip} --native {native}",
    "build_times": "python bench/build_times.py {specs}",
    "collectives_all_reduce": "python bench/collectives.py --chip {chip} --ranks {ranks} --iters {iters}",
    "models_train_step": "python bench/models.py --chip {chip} --native {native} --size {size} --models {models} "
                         "--precision {precisions} --optimizer {optimizers} --steps {steps} --warmup {warmup}{compile}",
    "attention": "python bench/attention.py --chip {chip} --native {native}{tune} --shapes {shapes}",
    "step_parts": "python bench/step_parts.py --device {device} --model {model} --size {size}{compile}",
}


def _fmt(x: float, digits: int = 3) -> str:
    if abs(x) >= 1e5:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _env(record: dict) -> str:
    e = record["environment"]
    where = e.get("gpu") or f"CPU host ({e.get('cpu_count')} cores)"
    return (f"{where}; torch {e['torch']}, Triton {e.get('triton')}, Python {e['python']}"
            + (f", CUDA {e['cuda']}" if e.get("cuda") else "") + f"; {e['date']}")


def resnet(r: dict) -> list[str]:
    chip, native = r["chip"], r["native"]
    host = any("host_ms" in v for v in r["results"].values())
    out = [f"| precision | {chip} median step (ms) | {native} median step (ms) | ratio | target ≤ 1.02 |"
           + (f" {chip} host (ms) | {native} host (ms) |" if host else ""),
           "|---|---|---|---|---|" + ("---|---|" if host else "")]
    spread = []
    for precision, v in r["results"].items():
        m = v["median_step_s"]
        row = (f"| {precision} | {_fmt(m[chip] * 1e3)} | {_fmt(m[native] * 1e3)} | "
               f"{v['ratio']:.2f} | {_met(v['ratio'] <= 1.02)} |")
        if "block_ratios" in v:
            spread.append(f"{precision} {min(v['block_ratios']):.2f}–{max(v['block_ratios']):.2f}")
        if host:
            h = v.get("host_ms", {})
            row += "".join(f" {_fmt(h[d]) if d in h else '–'} |" for d in (chip, native))
        out.append(row)
    out.append("")
    out.append(f"Batch {r['batch']}, {r['blocks']} alternating blocks of {r['steps_per_block']} timed steps per "
               "device (one worker process per device, see `bench/resnet50.py`)."
               + (" Host: the median time to queue a step (its last op issued), the rest of the step is the "
                  "device finishing; a step whose host time nears its step time is host-bound." if host else "")
               + (f" Ratio per block (min–max): {', '.join(spread)}." if spread else ""))
    return out


def overhead(r: dict) -> list[str]:
    out = ["| pair | op | chip µs/call | native µs/call | ratio | target ≤ 1.1 |", "|---|---|---|---|---|---|"]
    for pair, ops in r["results"].items():
        for op, v in ops.items():
            out.append(f"| {pair} | {op} | {_fmt(v['chip_us'])} | {_fmt(v['native_us'])} | {v['ratio']:.2f} | "
                       f"{_met(v['ratio'] <= 1.1)} |")
    return out


def triton(r: dict) -> list[str]:
    res = dict(r["results"])
    copy = res.pop("copy_bandwidth_GBps")
    out = [f"Device-to-device copy (the ceiling): **{copy:,.0f} GB/s** (read + write), "
           f"{r['large_elements']:,} float32 elements.", "",
           "| kernel | large: GB/s | of copy | target ≥ 0.9 | small: µs/call | native µs/call | ratio | target ≤ 2 |",
           "|---|---|---|---|---|---|---|---|"]
    for name, v in res.items():
        out.append(f"| {name} | {v['large_GBps']:,.0f} | {v['fraction_of_copy']:.2f} | "
                   f"{_met(v['fraction_of_copy'] >= 0.9)} | {_fmt(v['small_us'])} | {_fmt(v['small_native_us'])} | "
                   f"{v['small_ratio']:.1f} | {_met(v['small_ratio'] <= 2)} |")
    out += ["", f"Small size: {r['small_elements']:,} elements."]
    return out


def allocator(r: dict) -> list[str]:
    c, n = r["chip"], r["native"]
    out = [f"| size | {c} pairs/s | {n} pairs/s | raw driver pairs/s | {c} time / {n} time | target ≤ 1.2 | "
           f"{c} / raw | target ≥ 10 |", "|---|---|---|---|---|---|---|---|"]
    for size, v in r["results"].items():
        out.append(f"| {size} | {_fmt(v['chip_pairs_per_s'])} | {_fmt(v['native_pairs_per_s'])} | "
                   f"{_fmt(v['raw_pairs_per_s'])} | {v['native_over_chip']:.2f} | {_met(v['native_over_chip'] <= 1.2)} | "
                   f"{v['chip_over_raw']:.1f} | {_met(v['chip_over_raw'] >= 10)} |")
    return out


def builds(r: dict) -> list[str]:
    out = ["| spec | cold (s) | no-op (s) | parallel jobs |", "|---|---|---|---|"]
    for spec, v in r["results"].items():
        out.append(f"| `{spec}` | {v['cold_s']:.0f} | {v['noop_s']:.1f} | {v['jobs']} |")
    if not r.get("install", True):
        out += ["", "Wheels, not installed (one PrivateUse1 backend per environment): no-op is a rebuild that "
                "compiles nothing but packages the wheel again."]
    return out


def collectives(r: dict) -> list[str]:
    target = r["target"]
    out = [f"| size | library ms | library GB/s | staging ms | staging GB/s | library / staging | "
           f"target ≥ {target['ratio']:g} at {target['size']} | staging steps ms: to host / gloo / to device |",
           "|---|---|---|---|---|---|---|---|"]
    for size, v in sorted(r["results"].items(), key=lambda item: item[1]["bytes"]):
        lib, st, steps = v["library"], v["staging"], v["staging_steps_median_s"]
        met = _met(v["ratio"] >= target["ratio"]) if size == target["size"] else "–"
        out.append(f"| {size} | {_fmt(lib['median_s'] * 1e3)} | {_fmt(lib['busbw_GBps'])} | "
                   f"{_fmt(st['median_s'] * 1e3)} | {_fmt(st['busbw_GBps'])} | {v['ratio']:.1f} | {met} | "
                   + " / ".join(_fmt(steps[k] * 1e3) for k in ("to_host", "gloo", "to_device")) + " |")
    where = (f"{r['ranks']} ranks (processes, each on {r['chip']}:0 of its own simulated devices)" if r["chip"] == "npu"
             else f"{r['ranks']} rank(s) on {r['chip']}:0 (one process a device)")
    bandwidth = ("bus bandwidth = bytes × 2 (n − 1) / n / time (nccl-tests)" if r["ranks"] > 1 else
                 "one rank: the GB/s columns are algorithm bandwidth, bytes / time (bus bandwidth is zero)")
    out += ["", f"{where}, float32, "
            f"median of {r['iters']} iterations after {r['warmup']} warm-up, each iteration started together "
            f"on every rank and timed to the device drained, the slowest rank's time; {bandwidth}. Library: `init_process_group(backend="
            f"\"{r['backend']}\")`; staging: `torch_fl.distributed.StagedProcessGroup` on the same tensors. "
            "Both results checked (the sum) after the first and last iteration. Staging steps: its three "
            "steps timed one by one in a loop of their own (medians; they need not add up to the staging "
            "time). The host's cores are shared with other jobs: sizes under 1 MiB take well under a "
            "millisecond and move from run to run."]
    return out


def models(r: dict) -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import models as sweep   # bench/models.py: its table is the record's

    header = ["model", "size", "precision", "optimizer", f"{r['chip']} ms", f"{r['native']} ms", "ratio",
              "host ratio", "step-0 loss rel. diff", "last loss rel. diff", "CPU fallbacks", "status"]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in sweep.table_rows(r["results"], r["size"]):
        out.append("| " + " | ".join(_fmt(c) if isinstance(c, float) else str(c) for c in row) + " |")
    out.append("")
    for run, s in r["summary"].items():
        out.append(f"- {run}: median ratio {_fmt(s['median_ratio'])}, worst {_fmt(s['worst_ratio'])} "
                   f"({s['worst_model']}) over {s['models']} models")
    if not r["environment"].get("gpu"):
        out += ["", f"On a host without a GPU, {r['chip']}'s Triton kernels (Inductor's too, when compiled) run in "
                    "Triton's interpreter: the times are not a speed figure. What the record shows is the step-0 "
                    "loss against the native device and, compiled, the graph breaks."]
    breaks = sweep.graph_break_lines(r)
    if breaks:
        out += ["", "Graph breaks (torch.compile):", ""] + [f"- {line}" for line in breaks]
    return out + [""] + [f"Note: {note}" for note in r["notes"]]


# Said once, after every record of a benchmark's section.
NOTES = {
    "collectives_all_reduce": [
        "**Where the time goes.** Staging, as measured here, copied the chip tensor to a new host tensor (a "
        "new one each call: at 64 MiB mostly faulting in freshly mapped host pages, the CPU allocator returning "
        "large blocks to the system; it has reused its host buffers since, not measured again yet), runs gloo's all_reduce over TCP loopback (every byte through the kernel's socket "
        "buffers, the reduction on the host; the largest step at every size), then copies the result "
        "back to the chip, all on the host's two shared cores. The library's ranks meet in one POSIX "
        "shared-memory segment per communicator and run the all_reduce as a host function on a chip "
        "stream, in place on the chip's memory, chunk by chunk (2 MiB slots, `SIMCCL_SLOT_BYTES`): each "
        "rank copies its chunk into its slot, meets the others at a barrier (atomics, then a futex), and "
        "reduces from the slots into its buffer; from 64 KiB (`SIMCCL_SPLIT_BYTES`) each chunk is split "
        "so each rank reduces 1/n and then gathers the others' parts (two barriers a chunk). No host "
        "tensors, no sockets, no system calls but futex waits: what remains is memory bandwidth and the "
        "barriers. Below 1 MiB both paths are dominated by fixed costs (dispatch, a stream, a barrier, "
        "a TCP round trip and gloo's thread wake-ups, which on two shared cores take anywhere from "
        "0.3 to several ms), so the ratio there moves from run to run and says little.",
        "",
    ],
}


def step_parts(r: dict) -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from step_parts import PARTS   # bench/step_parts.py: its parts, in step order

    parts = {part: r["parts_ms"][part] for part in PARTS}
    lines = ["| " + " | ".join(parts) + " |", "|" + "---|" * len(parts),
             "| " + " | ".join(f"{_fmt(v)} ms" for v in parts.values()) + " |", "",
             "| op | self CPU µs a step | calls a step |", "|---|---|---|"]
    lines += [f"| `{op['name']}` | {_fmt(op['self_cpu_us_per_step'])} | {_fmt(op['calls_per_step'])} |"
              for op in r["top_ops"]]
    gpu = r.get("gpu")
    if gpu:   # a device on a CUDA GPU: the GPU's busy time, its kernels, the host's CUDA calls
        lines += ["", f"GPU busy {_fmt(gpu['busy_ms_per_step'])} ms a step "
                      f"({_fmt(gpu['launches_per_step'])} kernels and copies).", "",
                  "| GPU kernel or copy | GPU µs a step | calls a step |", "|---|---|---|"]
        lines += [f"| `{_short(k['name'])}` | {_fmt(k['gpu_us_per_step'])} | {_fmt(k['calls_per_step'])} |"
                  for k in gpu["top_kernels"]]
        lines += ["", "| CUDA call | host µs a step | calls a step |", "|---|---|---|"]
        lines += [f"| `{c['name']}` | {_fmt(c['host_us_per_step'])} | {_fmt(c['calls_per_step'])} |"
                  for c in gpu["top_driver_calls"]]
    return lines


def attention(r: dict) -> list[str]:
    n = r["native"]
    out = [f"Triton `attention` family (called directly on {r['chip']} tensors) against {n}'s memory-efficient "
           "attention; milliseconds per call, host launch included.", "",
           f"| case | Triton fwd | {n} fwd | Triton fwd+bwd | {n} fwd+bwd | ratio (fwd+bwd) |", "|---|---|---|---|---|---|"]
    ratios = []
    for name, v in r["results"].items():
        ratios.append(v["triton_fwd_bwd_ms"] / v["native_fwd_bwd_ms"])
        out.append(f"| {name} | {_fmt(v['triton_fwd_ms'])} | {_fmt(v['native_fwd_ms'])} | "
                   f"{_fmt(v['triton_fwd_bwd_ms'])} | {_fmt(v['native_fwd_bwd_ms'])} | {ratios[-1]:.2f} |")
    ratios.sort()
    out += ["", f"Ratio median {ratios[len(ratios) // 2]:.2f}, worst {ratios[-1]:.2f}."]
    tuning = {k: v for k, v in r.get("tuning", {}).items() if isinstance(v, dict)}
    if tuning:
        out += ["", f"`--tune` first timed the float32 ({r['tuning'].get('float32 products', '?')}) candidate blocks "
                "(BLOCK_M, BLOCK_N, warps, stages), causal and full summed, ms; the fastest went into the table "
                "before the cases above ran:", "", "| kernel, head size | candidates | fastest |", "|---|---|---|"]
        for name, v in tuning.items():
            timed = ", ".join(f"{b} {_fmt(t)}" for b, t in v["ms"].items())
            out.append(f"| {name} | {timed} | {v['fastest']} |")
    return out


def _short(kernel: str, width: int = 90) -> str:
    """A kernel's name cut to a table cell (C++ template names run to hundreds of characters)."""
    kernel = kernel.replace("|", "/")
    return kernel if len(kernel) <= width else kernel[:width - 1] + "…"


SECTIONS = [
    ("resnet50_train_step", "ResNet-50 training step", resnet),
    ("op_overhead", "Per-op host overhead", overhead),
    ("triton_kernels", "Triton fallback kernels", triton),
    ("allocator", "Caching allocator: alloc+free pairs per second", allocator),
    ("build_times", "`torchfl-gen build` times", builds),
    ("collectives_all_reduce", "all_reduce bus bandwidth: collective library vs gloo staging ({chip})", collectives),
    ("models_train_step", "Real-model training steps ({chip} vs {native})", models),
    ("attention", "Fused attention: Triton kernels vs native ({chip} vs {native})", attention),
    ("step_parts", "Where a training step's host time goes ({device}, {model})", step_parts),
]


def _python_launch(record: dict) -> bool:
    """Whether the record was measured with the chip's Triton ops launched from Python
    (TORCH_FL_TRITON_CPP_LAUNCH=0, a comparison run), as its Triton route says."""
    routes = list(record.get("triton_route", {}).values()) if record["benchmark"] == "op_overhead" else \
        [record.get("triton_route", {})] + [v.get("triton_route", {}) for v in record.get("results", {}).values()
                                             if isinstance(v, dict)]
    return any("TORCH_FL_TRITON_CPP_LAUNCH=0" in (route or {}).get("status", "") for route in routes)


def command(record: dict) -> str:
    name = record["benchmark"]
    prefix = "TORCH_FL_TRITON_CPP_LAUNCH=0 " if _python_launch(record) else ""
    return prefix + COMMANDS[name].format(
        pairs=" --pair ".join(record.get("results", {}).keys()) if name == "op_overhead" else "",
        chip=record.get("chip"), native=record.get("native"),
        specs=" ".join(record.get("results", {}).keys()) + ("" if record.get("install", True) else " --no-install")
        if name == "build_times" else "", ranks=record.get("ranks"), iters=record.get("iters"),
        size=record.get("size"), models=" ".join(record.get("models") or []),
        precisions=" ".join(record.get("precisions") or []), optimizers=" ".join(record.get("optimizers") or []),
        steps=record.get("steps_per_device"), warmup=record.get("warmup"),
        compile="" if record.get("compile", "none") == "none" else f" --compile {record['compile']}",
        device=record.get("device"), model=record.get("model"), shapes=" ".join(record.get("shapes") or []),
        tune=" --tune" if record.get("tuning") else "")


def render() -> str:
    records: dict[str, list[tuple[str, dict]]] = {}
    for path in sorted(RESULTS.glob("*/*.json")):
        record = json.loads(path.read_text())
        if record["benchmark"] not in COMMANDS:   # a result no section renders would vanish from the docs
            raise SystemExit(f"bench/report.py: {path}: no section renders benchmark {record['benchmark']!r}")
        records.setdefault(record["benchmark"], []).append((path.relative_to(ROOT).as_posix(), record))
    for found in records.values():
        found.sort(key=lambda entry: _python_launch(entry[1]))  # a comparison run after the figure it compares
    lines = ["# Benchmarks", "",
             "Generated by `python bench/report.py` from the results committed in `bench/results/` "
             "(one folder per machine). Do not edit; rerun a benchmark with its command, save its "
             "`--out` JSON there, and regenerate. Every figure is a ratio against a baseline measured "
             "in the same run. Where a target is missed, the analysis below says where the time goes.", ""]
    for name, title, table in SECTIONS:
        for source, record in records.get(name, []):
            suffix = " (comparison: Triton ops launched from Python)" if _python_launch(record) else ""
            heading = title.format(chip=record.get("chip"), native=record.get("native"), device=record.get("device"),
                                   model=record.get("model"))
            if record.get("compile", "none") != "none":
                heading += f", torch.compile ({record['compile']})"
            lines += [f"## {heading}{suffix}", "", f"Measured on {_env(record)}.", "",
                      f"Command: `{command(record)} --out {source}`", ""]
            lines += table(record) + [""]
        if records.get(name):
            lines += NOTES.get(name, [])
    analysis = ROOT / "bench" / "ANALYSIS.md"
    if analysis.exists():
        lines += [analysis.read_text().rstrip(), ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        if not DOC.exists() or DOC.read_text() != text:
            sys.exit("docs/benchmarks.md is stale: run python bench/report.py")
        return
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
