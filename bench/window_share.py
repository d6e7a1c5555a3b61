"""The working window's share of the budget (``window_token_share``), on both datasets.

The share changes the replay itself (what leaves the window is queued, summarized and
linked), so each share is a full run of `bench.locomo` and `bench.longmemeval` with
``WINDOW_TOKEN_SHARE`` set in the environment. This script reads those runs' JSON and
writes, per share: LoCoMo's ``memory_in_budget`` per category, LongMemEval's turn recall
in the question's thread (``memory_in_thread``, where the window shares the budget) and in
a session of its own (``memory_in_budget``), each with its tokens. Then it cross-validates
the share as `bench.joint_cv` does the ranking knobs: hold out one LoCoMo conversation or
one LongMemEval question, choose the share with the best mean of the two datasets on the
rest (LoCoMo overall, LongMemEval in the thread), score it on what was held out.

    for s in 0 0.2 0.5; do
      WINDOW_TOKEN_SHARE=$s python -m bench.locomo --out /tmp/share-$s
      WINDOW_TOKEN_SHARE=$s python -m bench.longmemeval --out /tmp/share-$s
    done
    python -m bench.window_share /tmp/share-0 /tmp/share-0.2 /tmp/share-0.5
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


def _share_of(context: dict[str, Any], name: str) -> float:
    if KNOB not in context:
        raise ValueError(f"{name} does not record {KNOB}")
    return float(context[KNOB])


def read_run(folder: Path) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """One share's LoCoMo and LongMemEval reports, checked to be runs of the same share."""
    locomo = json.loads((folder / "locomo.json").read_text())
    lme = json.loads((folder / "longmemeval.json").read_text())
    share = _share_of(locomo["config"]["replay_context"], f"{folder}/locomo.json")
    if _share_of(lme["config"]["context"], f"{folder}/longmemeval.json") != share:
        raise ValueError(f"{folder}: the two runs are of different shares")
    return share, locomo, lme


def summarize(runs: Sequence[tuple[float, dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Per share, both datasets' figures; the share cross-validated over both."""
    default = float(Settings().by_name()[KNOB])
    locomo_rows: dict[str, dict[str, Any]] = {}
    lme_rows: dict[str, dict[str, Any]] = {}
    shares: dict[str, Any] = {}
    for share, locomo, lme in sorted(runs, key=lambda r: r[0]):
        key = str(share)
        if key in shares:
            raise ValueError(f"two runs of share {key}")
        lme_results = lme["results"]
        shares[key] = {
            "locomo": locomo["results"]["memory_in_budget"],
            "locomo_hybrid": locomo["results"]["hybrid"]["by_category"],
            "longmemeval_in_thread": lme_results["memory_in_thread"],
            "longmemeval_in_budget": lme_results["memory_in_budget"],
            "longmemeval_hybrid": lme_results["hybrid"],
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
    if str(default) not in shares:
        raise ValueError(f"no run of the default share {default}")
    cv = cross_validate(list(locomo_rows.values()), list(lme_rows.values()), str(default))
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
