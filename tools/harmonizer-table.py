#!/usr/bin/env python3
"""The harmonizer encodings table of reports/harmonizer.md from training runs' eval.json files.

Usage: tools/harmonizer-table.py RUN_DIR... (each evaluated by `pianoformer eval --task
harmonization`). Runs are grouped by encoding and direction; each cell is the mean over seeds
with the spread (min-max) when there are several. Repeats: the share of beats of a repeated
phrase whose chord (root and family) is its first occurrence's, with detected phrases and with
the annotated ones; the annotations' own agreement is printed below the table.
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

from run_files import final_valid_loss


def main(runs):
    groups = defaultdict(list)
    annotations = None
    for arg in runs:
        run = Path(arg)
        ev = json.loads((run / "eval.json").read_text())
        config = json.loads((run / "config.json").read_text())
        context = "context" if config["input_dim"] > 76 else "beat only"
        key = (ev["pe"], ev["direction"], context)
        test = ev["test"]
        h, ha = test["harmonizer"]["scores"], test["harmonizer_annotated_phrases"]["scores"]
        annotations = test["annotations"]["scores"]["repetition_agreement"]
        groups[key].append(
            {
                "run": run.name,
                "loss": final_valid_loss(run),
                "root": h["accuracy"][0],
                "family": h["accuracy"][1],
                "exact": h["accuracy"][2],
                "repeats": h["repetition_agreement"],
                "repeats_annotated": ha["repetition_agreement"],
                "cc": h["measures"]["cc"],
            }
        )

    def cell(rows, field, digits=3):
        values = [r[field] for r in rows if r[field] is not None]
        mean = sum(values) / len(values)
        if len(values) == 1:
            return f"{mean:.{digits}f}"
        return f"{mean:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"

    print("| encoding | direction | inputs | seeds | valid loss | root | root+family | exact "
          "| repeats (detected phrases) | repeats (annotated phrases) | CC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (pe, direction, context), rows in sorted(groups.items()):
        print(f"| {pe} | {direction} | {context} | {len(rows)} | {cell(rows, 'loss')} "
              f"| {cell(rows, 'root')} | {cell(rows, 'family')} | {cell(rows, 'exact')} "
              f"| {cell(rows, 'repeats')} | {cell(rows, 'repeats_annotated')} "
              f"| {cell(rows, 'cc', 1)} |")
    print(f"\nThe annotations' own repeats: {annotations:.3f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
