"""The window's share of the budget (``window_token_share``), cross-validated on both datasets.

Each share is a full run of both benchmarks (the share changes the replay), then::

    for s in 0 0.2 0.5; do
      WINDOW_TOKEN_SHARE=$s python -m bench locomo --out /tmp/share-$s
      WINDOW_TOKEN_SHARE=$s python -m bench longmemeval --out /tmp/share-$s
    done
    python -m bench window_share /tmp/share-0 /tmp/share-0.2 /tmp/share-0.5

Folds as `bench.joint_cv`'s, on LoCoMo overall and LongMemEval in the question's thread.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import main, write_results
from bench.joint_cv import cross_validate
from bench.locomo_data import SCORED_CATEGORIES
from memory_graph_agent.settings import Settings

KNOB = "window_token_share"


def read_run(folder: Path) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """One share's LoCoMo and LongMemEval reports, checked to be runs of the same share."""
    locomo = json.loads((folder / "locomo.json").read_text())
    lme = json.loads((folder / "longmemeval.json").read_text())
    shares = []
    for name, context in (
        ("locomo", locomo["config"]["replay_context"]),
        ("longmemeval", lme["config"]["context"]),
    ):
        if KNOB not in context:
            raise ValueError(f"{folder}/{name}.json does not record {KNOB}")
        shares.append(float(context[KNOB]))
    if shares[0] != shares[1]:
        raise ValueError(f"{folder}: the two runs are of different shares")
    return shares[0], locomo, lme


def summarize(runs: Sequence[tuple[float, dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Per share, both datasets' figures; the share cross-validated over both."""
    default = str(float(Settings().by_name()[KNOB]))
    locomo_rows: dict[str, dict[str, Any]] = {}
    lme_rows: dict[str, dict[str, Any]] = {}
    shares: dict[str, Any] = {}
    for share, locomo, lme in sorted(runs, key=lambda r: r[0]):
        key = str(share)
        if key in shares:
            raise ValueError(f"two runs of share {key}")
        shares[key] = {
            "locomo": locomo["results"]["memory_in_budget"],
            "locomo_hybrid": locomo["results"]["hybrid"]["by_category"],
            "longmemeval_in_thread": lme["results"]["memory_in_thread"],
            "longmemeval_in_budget": lme["results"]["memory_in_budget"],
            "longmemeval_hybrid": lme["results"]["hybrid"],
        }
        for q in locomo["questions"]:
            if q["category"] in SCORED_CATEGORIES:
                fold = f"locomo:{q['sample_id']}"
                row = locomo_rows.setdefault(f"{fold}:{q['index']}", {"fold": fold, "grid": {}})
                row["grid"][key] = q["recall"]["memory_in_budget"]
        for q in lme["questions"]:
            fold = f"lme:{q['question_id']}"
            row = lme_rows.setdefault(fold, {"fold": fold, "grid": {}})
            row["grid"][key] = q["methods"]["memory_in_thread"]["turn_recall"]
    if default not in shares:
        raise ValueError(f"no run of the default share {default}")
    cv = cross_validate(list(locomo_rows.values()), list(lme_rows.values()), default)
    return {"knob": KNOB, "shares": shares, "cross_validated": cv}


def flags(p: argparse.ArgumentParser) -> None:
    """The runs' folders; ``--out`` is where ``window_share.json`` goes."""
    p.set_defaults(out=Path("bench/results"))
    p.add_argument("runs", nargs="+", help="folders with a locomo.json and a longmemeval.json")


def run(a: argparse.Namespace) -> None:
    """Read the runs' folders, write the summary and show its table."""
    summary = summarize([read_run(Path(f)) for f in a.runs])
    write_results(a.out, "window_share", summary, show=("window-share",))


if __name__ == "__main__":
    raise SystemExit(main("window_share"))
