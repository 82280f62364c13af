"""Fault-injection campaigns: run one (every trial in its own worker process) and read its
summary, per kind and per op, and its trials."""

import json
import pathlib
import sys

from . import _args, _probelab
from ._records import read_json, wrap
from ._run import _sets, _source


class CampaignResult:
    """A campaign's results: ``summary`` (summary.json as a dict: coverage, localization
    top-1/top-3, SDC rate, latency, false positives, each rate {k, n, rate, ci95}), the output
    directory and its files."""

    def __init__(self, out_dir, summary=None):
        self.out_dir = pathlib.Path(out_dir)
        self.summary = read_json(self.out_dir / "summary.json") if summary is None else summary

    @property
    def name(self):
        return self.summary.get("scenario")

    @property
    def complete(self):
        return bool(self.summary.get("complete"))

    @property
    def overall(self):
        """Scores over every trial: trials, outcomes {top1, top3, ...: count}, coverage,
        probe_coverage, top1, top3, sdc_rate, masked_rate, unrecoverable_rate, latency_cycles."""
        return wrap(self.summary.get("overall", {}))

    @property
    def by_kind(self):
        """The same scores per injector kind: {kind: scores}."""
        return wrap(self.summary.get("by_kind", {}))

    @property
    def by_op(self):
        """The same scores per op: {op: scores}."""
        return wrap(self.summary.get("by_op", {}))

    @property
    def html_path(self):
        """summary.html: outcome bars with Wilson intervals per kind and per op."""
        return self.out_dir / "summary.html"

    @property
    def text(self):
        """summary.txt."""
        return (self.out_dir / "summary.txt").read_text(encoding="utf-8")

    def trials(self):
        """One record per trial (trials.jsonl, sorted by index): index, kind, op, outcome,
        descriptor, observation..."""
        out = []
        with open(self.out_dir / "trials.jsonl", encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue  # a truncated last line of an interrupted campaign
        return wrap(sorted(out, key=lambda t: t.get("index", 0)))

    def __repr__(self):
        o = self.summary.get("overall", {})
        return "CampaignResult(%r, %s of %s trials, %s)" % (self.name, o.get("trials"),
                                                           self.summary.get("trials_requested"), self.out_dir)


def campaign(scenario, trials=None, jobs=1, seed=None, out=None, resume=False, faults=None, set=None,
             progress=None):
    """Runs a fault-injection campaign on a scenario file with a ``campaign:`` section, as
    ``probelab campaign`` does, and returns its :class:`CampaignResult`.

    ``trials`` / ``seed`` override the campaign's; ``out`` defaults to
    ``out/campaign/<scenario name>``; ``resume=True`` keeps the finished trials of ``out``;
    ``faults``: fault entries (dicts or YAML text) replacing the scenario's list; ``set``:
    scenario overrides as for :func:`load_scenario`; ``progress``: a callable receiving
    {done, total, resumed, last} after every trial, or True to print a line. Under ``mpirun``
    the trials are split across the ranks; rank 0 returns the summary, the others None.
    """
    src = _source(scenario)
    if src.kind != "file":
        raise TypeError("a campaign runs a scenario file (or a bundled scenario name)")
    trials = _args.integer("trials", trials, 0, 100000000, none_ok=True)
    jobs = _args.integer("jobs", jobs, 1, 256)
    seed = _args.integer("seed", seed, 0, 2**64 - 1, none_ok=True)
    out = _args.path("out", out) if out is not None else ""
    fault_texts = [_args.text_ok("faults", f) if isinstance(f, str) else _probelab.to_yaml(f, flow=True) for f in (faults or [])]
    if progress is True:
        progress = lambda p: print("[%d/%d] %s" % (p["done"], p["total"], p["last"]), file=sys.stderr, flush=True)
    res = json.loads(_probelab.campaign(src.value, trials, jobs, seed, out, bool(resume), fault_texts,
                                        _sets(set), progress))
    if res.get("rank", 0) != 0:
        return None
    return CampaignResult(res["out_dir"], res["summary"])


def open_campaign(out_dir):
    """A finished campaign from its output directory (holding summary.json)."""
    return CampaignResult(out_dir)
