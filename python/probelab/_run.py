"""Scenarios and runs: load and validate a scenario (a file, a bundled name or a dict), run it in
child processes through the scenario runner, and read what it produced."""

import json
import os
import pathlib
import sys

from . import _args, _probelab
from ._errors import BadInputError, ExpectationFailed
from ._records import Record, read_json, wrap


def _sets(values):
    """--set overrides from a dict {dotted.key: value} or a list of "key=value" strings."""
    if values is None:
        return []
    if isinstance(values, dict):
        return [(_args.text_ok("set", str(k)), _args.text_ok("set", v) if isinstance(v, str) else _probelab.to_yaml(v, flow=True))
                for k, v in values.items()]
    if isinstance(values, (str, bytes)):
        raise BadInputError("set: expected a dict {key: value} or a list of 'key=value' strings, got %r" % (values,),
                            file="--set")
    out = []
    for item in values:
        if not isinstance(item, str) or "=" not in item:
            raise BadInputError("a --set override is 'key=value', got %r" % (item,), file="--set")
        _args.text_ok("set", item)
        k, v = item.split("=", 1)
        out.append((k.strip(), v.strip()))
    return out


def bundled_scenarios():
    """Paths of the bundled scenario suite (scenarios/*.yaml), sorted."""
    root = pathlib.Path(_probelab.source_root()) / "scenarios"
    return sorted(p for p in root.glob("*.yaml"))


def _source(scenario):
    """A Source for the extension: a Scenario, a path, a bundled name or a dict."""
    if isinstance(scenario, Scenario):
        return scenario._source
    if isinstance(scenario, dict):
        return _probelab.Source("text", _probelab.to_yaml(scenario), "<dict>")
    if isinstance(scenario, (str, os.PathLike)):
        path = pathlib.Path(_args.path("scenario", scenario))
        if not path.exists() and path.suffix == "" and os.sep not in str(scenario):
            bundled = pathlib.Path(_probelab.source_root()) / "scenarios" / (str(scenario) + ".yaml")
            if bundled.exists():
                path = bundled
        return _probelab.Source("file", str(path), "")
    raise TypeError("a scenario is a path, a bundled scenario name, a dict or a probelab.Scenario, not %s"
                    % type(scenario).__name__)


class Scenario:
    """A scenario, loaded and validated in this process exactly as ``probelab run`` does before
    it simulates anything: the YAML, the model (bundled, YAML or ONNX), the chip config, the
    probe config, the injectors and the expectations. Bad input raises :class:`ScenarioError` /
    :class:`BadInputError` naming file, line, key and what was expected.

    Attributes: ``name``, ``file``, ``description``, ``model``, ``model_file``, ``mode``,
    ``ranks``, ``steps``, ``seed``, ``probes`` (bool), ``injections`` (count), ``variants``,
    ``expectations`` ([{kind, line}]), ``chip`` (preset), ``executed_ops`` (ops of the
    executed graph), ``yaml`` (the resolved document after overrides).
    """

    def __init__(self, scenario, set=None, seed=None):
        self._source = _source(scenario)
        self._sets = _sets(set)
        self._seed = _args.integer("seed", seed, 0, 2**64 - 1, none_ok=True)
        info = _probelab.check_scenario(self._source, self._sets, self._seed)
        for k, v in info.items():
            setattr(self, k, v)

    def __repr__(self):
        return "Scenario(%r, model=%r, %s, ranks=%s, steps=%s)" % tuple(
            getattr(self, k, None) for k in ("name", "model", "mode", "ranks", "steps"))


def load_scenario(scenario, set=None, seed=None):
    """Loads and validates a scenario without running it (see :class:`Scenario`).

    ``scenario``: a path, the name of a bundled scenario (``"03_nan_in_softmax"``) or a dict
    with the keys of a scenario file. ``set``: overrides as ``{"dotted.key": value}`` or
    ``["key=value", ...]`` (``--set``). ``seed``: overrides the scenario seed (``--seed``).
    """
    return Scenario(scenario, set=set, seed=seed)


class Dump(Record):
    """One entry of a rank's dump.json manifest: ``op``, ``tensor``, ``step``, ``rank``,
    ``edge`` (out0, in1, ...), ``dtype``, ``shape``, ``payload`` (statistics | full | hash),
    ``statistics``, ``file`` (None when only statistics were captured), ``encoding``
    (raw | xor_delta), ``compression``, ``trigger``."""

    def __init__(self, entry, directory, manifest_text):
        super().__init__(wrap(entry))
        object.__setattr__(self, "_dir", str(directory))
        object.__setattr__(self, "_manifest", manifest_text)

    @property
    def has_data(self):
        """True when a tensor file was written (full or triggered dumps)."""
        return bool(self.get("file"))

    def array(self):
        """The tensor as a numpy array of the manifest's dtype and shape: decompressed, delta
        decoded against its base and checked against both checksums. bfloat16 comes back as
        float32 (exact; numpy has no bfloat16)."""
        if not self.has_data:
            raise ValueError("%s %s step %s rank %s has no tensor file (payload %s)"
                             % (self.get("op"), self.get("edge"), self.get("step"), self.get("rank"),
                                self.get("payload")))
        return _probelab.load_dump(self._dir, self._manifest, json.dumps(self))


class Run:
    """The result of one scenario run: report.json as a dict and accessors over it, the output
    directory and its dumps. Obtained from :func:`run`, :func:`run_all` or :func:`open_run`."""

    def __init__(self, out_dir, report=None):
        self.out_dir = pathlib.Path(out_dir)
        self.report = read_json(self.out_dir / "report.json") if report is None else report
        """report.json as a dict (schema in sim/run/report.h)."""

    # -- the report ------------------------------------------------------------------------
    @property
    def name(self):
        return self.report.get("scenario", {}).get("name")

    @property
    def passed(self):
        """True when the simulation finished and every expectation held (CLI exit code 0)."""
        return bool(self.report.get("passed"))

    @property
    def status(self):
        """"ok"; "error" when the simulation failed (see :attr:`error`); "hang" when the simulated
        job hung (see :attr:`hang`)."""
        return self.report.get("status")

    @property
    def hang(self):
        """Where every rank was blocked when the job hung, and why (time_ps, cycle, noticed_by,
        waiting, blocked: [{rank, step, op, collective, comm, seq, waits_for, since_cycle,
        conflict}], explanation, summary); None when it did not."""
        return wrap(self.report.get("hang"))

    @property
    def error(self):
        return self.report.get("error")

    @property
    def report_path(self):
        return self.out_dir / "report.json"

    @property
    def html_path(self):
        """report.html: the self-contained page of this report."""
        return self.out_dir / "report.html"

    @property
    def summary(self):
        """summary.txt, the human summary."""
        return (self.out_dir / "summary.txt").read_text(encoding="utf-8")

    def _list(self, key):
        v = self.report.get(key)
        return wrap(v) if isinstance(v, list) else []

    def anomalies(self, kind=None, op=None, role=None, step=None, rank=None):
        """Exception latches (kind overflow | underflow | invalid | nan_input), with op, tensor,
        element, coordinate, step, rank, cycle, latency_cycles, role (source | propagation),
        source_op, propagation_path, call_stack... ``kind="condition"`` gives the watch-point
        conditions that held instead (see :meth:`conditions`). Filters compare equal."""
        out = []
        for a in self._list("anomalies"):
            if (kind is None and a.get("kind") == "condition") or (kind is not None and a.get("kind") != kind):
                continue
            if (op is not None and a.get("op") != op) or (role is not None and a.get("role") != role):
                continue
            if (step is not None and a.get("step") != step) or (rank is not None and a.get("rank") != rank):
                continue
            out.append(a)
        return out

    def conditions(self):
        """Watch-point conditions that held: op, tensor, step, rank, condition, watch_point,
        actions, origin."""
        return self.anomalies(kind="condition")

    def comparisons(self, failed=None, op=None):
        """Reference comparisons (msprobe-style): op, op_type, step, rank, tensor, passed,
        metrics {cosine, max_abs_err, max_rel_err, rmse, max_ulp, ...}, reasons, inner (fused-op
        decomposition), inner_culprit. ``failed=True`` keeps the failing ones."""
        return [c for c in self._list("comparisons")
                if (failed is None or c.get("passed") == (not failed)) and (op is None or c.get("op") == op)]

    @property
    def consistency(self):
        """The cross-rank consistency section: checked, consistent, reference_rank, ranks,
        first_divergence, divergences, per_step, growing, comparisons, missing."""
        return wrap(self.report.get("consistency") or {})

    def divergences(self):
        """Each (step, op edge) where ranks differ from the reference rank: ranks, rank_diffs
        (each rank's own difference), max_abs_diff, basis, tensor."""
        return wrap(self.consistency.get("divergences", []))

    def diagnosis(self):
        """Root-cause candidates, best first: op, cause, score, tensor, step, rank, evidence,
        suggestion."""
        return self._list("diagnosis")

    def expectations(self):
        """The scenario's expectations: index, kind, line, passed, expected, actual."""
        return self._list("expectations")

    def failures(self):
        """The expectations that did not hold."""
        return [e for e in self.expectations() if not e.get("passed")]

    def injections(self):
        """Injected faults: kind, descriptor, fired, proof (site, bits before and after)."""
        return self._list("injections")

    def variants(self):
        return self._list("variants")

    @property
    def capture(self):
        """Capture statistics: records, drained, dropped, bytes, stall_cycles, overhead_percent..."""
        return wrap(self.report.get("capture") or {})

    @property
    def cycles(self):
        """Simulated cycles: total, per_rank, per_step, baseline."""
        return wrap(self.report.get("cycles") or {})

    def ops(self):
        """Device cycles per executed op and rank: op, type, rank, tasks, cycles, probe_cycles."""
        return self._list("ops")

    def check(self):
        """Raises :class:`ExpectationFailed` unless the run passed; returns the run."""
        if not self.passed:
            raise ExpectationFailed(self)
        return self

    # -- dumps and outputs -----------------------------------------------------------------
    def _manifests(self, variant=None):
        base = self.out_dir / "variants" / variant / "dump" if variant else self.out_dir / "dump"
        for m in sorted(base.glob("rank*/dump.json"), key=lambda p: int(p.parent.name[4:] or 0)):
            text = m.read_text(encoding="utf-8")
            _probelab.check_manifest(text, str(m))  # an edited manifest: BadInputError, as the CLI
            yield m.parent, text

    def dumps(self, op=None, step=None, rank=None, edge=None, payload=None, variant=None):
        """The probe runtime's captures (every rank's dump.json), as :class:`Dump` entries in
        manifest order; ``.array()`` loads a tensor. Filters compare equal (``op`` also accepts a
        glob such as ``"attn/*"``); ``variant`` reads a variant's dumps."""
        import fnmatch
        out = []
        for directory, text in self._manifests(variant):
            manifest = json.loads(text)
            for e in manifest.get("entries", []):
                if op is not None and not fnmatch.fnmatchcase(e.get("op", ""), op):
                    continue
                if (step is not None and e.get("step") != step) or (rank is not None and e.get("rank") != rank):
                    continue
                if (edge is not None and e.get("edge") != edge) or (payload is not None and e.get("payload") != payload):
                    continue
                out.append(Dump(e, directory, text))
        return out

    def dump(self, op, step=0, rank=0, edge="out0", variant=None):
        """The tensor dumped for ``op`` (exact name) at ``step`` on ``rank`` as a numpy array;
        the last such capture when several were written (e.g. a capture and a break dump)."""
        found = [d for d in self.dumps(op=None, step=step, rank=rank, edge=edge, variant=variant)
                 if d.get("op") == op and d.has_data]
        if not found:
            have = sorted({d.get("op") for d in self.dumps(step=step, rank=rank, variant=variant) if d.has_data})
            raise KeyError("no tensor dumped for %s %s at step %s rank %s; ops with tensors there: %s"
                           % (op, edge, step, rank, ", ".join(have) or "none"))
        return found[-1].array()

    def outputs(self, rank=0):
        """The tensors fetched at the end of the run (outputs/rank<r>/*.npy) by file stem."""
        d = self.out_dir / "outputs" / ("rank%d" % rank)
        return {p.stem: _probelab.read_npy(str(p)) for p in sorted(d.glob("*.npy"))}

    def __repr__(self):
        return "Run(%r, %s, %s)" % (self.name, "passed" if self.passed else "FAILED", self.out_dir)


def open_run(out_dir):
    """A finished run from its output directory (``<out>/<name>``, holding report.json)."""
    return Run(out_dir)


def _progress(progress):
    if progress is True:
        return lambda line: print(line, file=sys.stderr, flush=True)
    return progress


def run_all(scenarios=None, out="out", jobs=1, baseline=True, trace=True, timeout=3600, set=None, seed=None,
            progress=None):
    """Runs scenarios as ``probelab run`` does and returns one :class:`Run` each, in order.

    ``scenarios``: paths, bundled names, dicts or :class:`Scenario` objects (default: the
    bundled suite). Each scenario writes ``<out>/<name>/`` (report.json, report.html,
    summary.txt, trace.json, dump/, outputs/). Every simulation -- the run with probes, the same
    run without probes (the capture-overhead baseline, unless ``baseline=False``) and every
    variant -- runs in its own child process, ``jobs`` at a time; the Python process never
    elaborates SystemC, so it can run any number of scenarios. ``set`` / ``seed`` as for
    :func:`load_scenario`; ``timeout`` kills a simulation after that many seconds (0: never);
    ``progress``: a callable receiving one line per finished simulation, or True to print them.

    Raises :class:`ScenarioError` / :class:`BadInputError` on bad input before anything runs.
    A failed expectation does not raise: see :attr:`Run.passed`, :meth:`Run.check`.
    """
    if scenarios is None:
        scenarios = bundled_scenarios()
    if isinstance(scenarios, (str, os.PathLike, dict, Scenario)):
        scenarios = [scenarios]
    scenarios = list(scenarios)  # a generator is read more than once below
    out = _args.path("out", out)
    jobs = _args.integer("jobs", jobs, 1, 256)
    timeout = _args.seconds("timeout", timeout)
    seed = _args.integer("seed", seed, 0, 2**64 - 1, none_ok=True)
    # One set of overrides per run (the runner loads every scenario with the same options):
    # set/seed if given, else those a Scenario object was loaded with.
    sets, seeds = _sets(set), seed
    if set is None and seed is None:
        loaded = {(tuple(s._sets), s._seed) for s in scenarios if isinstance(s, Scenario)}
        if len(loaded) > 1:
            raise ValueError("the scenarios were loaded with different set/seed overrides; run them separately")
        if loaded:
            sets, seeds = list(next(iter(loaded))[0]), next(iter(loaded))[1]
    sources = [_source(s) for s in scenarios]
    text = _probelab.run(sources, out, jobs, bool(baseline), bool(trace), timeout, sets, seeds,
                         _progress(progress))
    runs = [Run(o["out_dir"], o["report"]) for o in json.loads(text)]
    bad = [r for r in runs if r.report.get("bad_input")]
    if bad:
        raise BadInputError("%s: %s" % (bad[0].name, bad[0].error), runs=runs)
    return runs


def run(scenario, out="out", jobs=1, baseline=True, trace=True, timeout=3600, set=None, seed=None, progress=None,
        check=False):
    """Runs one scenario (see :func:`run_all`) and returns its :class:`Run`; ``check=True``
    raises :class:`ExpectationFailed` when an expectation did not hold."""
    r = run_all([scenario], out=out, jobs=jobs, baseline=baseline, trace=trace, timeout=timeout, set=set, seed=seed,
                progress=progress)[0]
    return r.check() if check else r
