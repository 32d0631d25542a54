#!/usr/bin/env python3
"""The melody encodings table of reports/melody.md from training runs' eval.json files.

Usage: tools/melody-table.py [--eval FILE] RUN_DIR... (each evaluated by `pianoformer eval
--task melody`; FILE, the evaluation's file in each run folder, eval.json unless given: a
copy kept of another evaluation, such as one with `--samples 3`).
Prints one row a run (its own temperatures and echo, chosen on validation), then one row an
encoding: the mean over its seeds with the spread (min-max). Test songs, written from their
annotated lanes alone; the real melodies' figures first.
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

from run_files import final_valid_loss

FIELDS = ["notes", "chord_tones", "substituted", "steps", "leaps", "repeat_f1", "contrast_f1",
          "breathing", "distance"]


def encoding(ev):
    if ev["pe"] == "none":
        return "NoPE"
    name = {"sine_spe": "sineSPE", "fstripe": "F-StrIPE", "conv_spe": "convSPE"}.get(ev["pe"], ev["pe"])
    return f"gated {name}" if ev.get("gated") else name


def main(runs, file="eval.json"):
    groups = defaultdict(list)
    real = None
    evals = []
    for arg in runs:
        run = Path(arg)
        ev = json.loads((run / file).read_text())
        evals.append(ev)
        seed = json.loads((run / "run.json").read_text())["options"]["seed"]
        test, written = ev["test"], ev["test"]["written"]
        real = test["real"]
        # The validation distance of the setting chosen (the sweep's least).
        distance = min(s["distance"] for s in ev["sweep"])
        pitch = ev["pitch_temperature"] or ev["temperature"]  # none: the rhythm's
        setting = f"T {ev['temperature']:.2g}, pitch {pitch:.2g}, echo {ev['echo']:.2g}"
        groups[encoding(ev)].append({
            "seed": seed, "setting": setting, "loss": final_valid_loss(run),
            "test_loss": ev["test_loss"], "notes": written["onsets_per_bar"] / real["onsets_per_bar"],
            "chord_tones": written["chord_tones"], "substituted": ev["substituted"]["chord_tones"],
            "steps": written["steps"], "leaps": written["leaps"], "repeat_f1": written["repeat_f1"],
            "contrast_f1": written["contrast_f1"], "breathing": written["breathing"],
            "distance": distance,
        })

    def fmt(field, v):
        return f"{v:.2f}×" if field == "notes" else f"{v:.2f}" if field == "distance" else f"{v:.3f}"

    def cell(rows, field):
        values = [r[field] for r in rows]
        mean = sum(values) / len(values)
        if len(values) == 1:
            return fmt(field, mean)
        return f"{fmt(field, mean)} ({fmt(field, min(values))}–{fmt(field, max(values))})"

    samples = {ev.get("samples", 1) for ev in evals}
    print(f"Melodies a song per setting: {', '.join(map(str, sorted(samples)))}.\n")
    print("| encoding | seed | chosen on validation | validation loss (training's) | test cross-entropy "
          "| notes | chord tones | … substituted | steps | leaps | repeat F1 | different F1 "
          "| breathing | validation distance |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| real melodies | | | | | {real['onsets_per_bar']:.2f} a bar | {real['chord_tones']:.3f} | "
          f"| {real['steps']:.3f} | {real['leaps']:.3f} | {real['repeat_f1']:.3f} "
          f"| {real['contrast_f1']:.3f} | {real['breathing']:.3f} | |")
    for name, rows in sorted(groups.items()):
        for r in sorted(rows, key=lambda r: r["seed"]):
            print(f"| {name} | {r['seed']} | {r['setting']} | {r['loss']:.3f} | {r['test_loss']:.3f} | "
                  + " | ".join(fmt(f, r[f]) for f in FIELDS) + " |")
    print("\nMean over seeds (min–max):\n")
    print("| encoding | seeds | validation loss | " + " | ".join(FIELDS) + " |")
    print("|---|---|---|" + "---|" * len(FIELDS))
    for name, rows in sorted(groups.items()):
        print(f"| {name} | {len(rows)} | {cell(rows, 'loss')} | "
              + " | ".join(cell(rows, f) for f in FIELDS) + " |")


if __name__ == "__main__":
    args = sys.argv[1:]
    file = "eval.json"
    if args[:1] == ["--eval"] and len(args) > 1:
        file, args = args[1], args[2:]
    if not args:
        sys.exit(__doc__)
    main(args, file)
