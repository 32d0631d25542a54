#!/usr/bin/env python3
"""The F-StrIPE paper's Table I from accompaniment runs (issue 33): one row per run family,
mean ± std over its seeds, from each run's `eval.json` (written by `pianoformer eval --task
accompaniment`).

Usage: tools/paper-table.py RUN_DIR... (runs named NAME-seedN are grouped by NAME)

Columns: validation loss; what the ablations cost, as a share of the loss (uniform attention;
labels at zero and another song's, where the encoding reads labels); and the 16-bar scores
(CS, SSMD, GS, NDD, onset F1) on the test songs.
"""
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def summary(values, fmt="{:.5g}", spread="{:.2g}", before="", after=""):
    """Mean ± standard deviation of `values` (None left out), or the one value; "—" for none."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    text = before + fmt.format(statistics.fmean(values))
    if len(values) > 1:
        text += " ± " + spread.format(statistics.stdev(values))
    return text + after


def stats(values):
    return summary(values)


def percent(values):
    return summary(values, "{:.2f}", "{:.2f}", "+", " %")


def main(dirs):
    families = defaultdict(list)
    for d in dirs:
        path = Path(d) / "eval.json"
        if not path.exists():
            print(f"skipped {d}: no eval.json", file=sys.stderr)
            continue
        name = re.sub(r"-seed\d+$", "", Path(d).name)
        families[name].append(json.loads(path.read_text()))
    if not families:
        sys.exit("no evaluated runs given")
    print("| runs | seeds | validation loss | uniform attention | labels at zero | another song's labels "
          "| CS | SSMD | GS | NDD | onset F1 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, runs in families.items():
        abl = [r["ablations"] for r in runs]
        loss = [a["loss"] for a in abl]

        def cost(key):
            return [100 * (a[key] / a["loss"] - 1) if a.get(key) is not None else None for a in abl]

        test = [r["test"]["16"] for r in runs]
        score = lambda k: stats([t[k]["mean"] for t in test])
        print(
            f"| {name} | {len(runs)} | {stats(loss)} | {percent(cost('uniform_attention'))} "
            f"| {percent(cost('labels_zero'))} | {percent(cost('labels_other'))} "
            f"| {score('cs')} | {score('ssmd')} | {score('gs')} | {score('ndd')} "
            f"| {stats([t['onset_f1'] for t in test])} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
