"""probelab: a simulated Da Vinci-style AI accelerator hosting a real precision-probe runtime,
with fault injectors, scripted scenario replays and fault-injection campaigns.

The Python API runs the same harness as the ``probelab`` command:

    import probelab
    run = probelab.run("03_nan_in_softmax", out="out")      # a bundled scenario, a path or a dict
    run.passed                                               # every expectation held
    for a in run.anomalies():                                # exception latches
        print(a.kind, a.op, a.element, a.step, a.rank, a.role)
    x = run.dump("attn/softmax", step=2)                     # a dumped tensor as a numpy array
    print(run.html_path)                                     # report.html, self-contained

Scenarios are validated in this process (errors raise ScenarioError with file, line and key);
every simulation runs in a child process, so a session can run any number of them.
See README.md ("Python") for a tutorial.
"""

import os as _os

from . import _build_info

# Bundled scenarios and models are found relative to the source tree this module was built from
# (unless PROBELAB_SOURCE_DIR says otherwise); the simulations forked from here inherit it.
if "PROBELAB_SOURCE_DIR" not in _os.environ and _os.path.isdir(_os.path.join(_build_info.SOURCE_DIR, "scenarios")):
    _os.environ["PROBELAB_SOURCE_DIR"] = _build_info.SOURCE_DIR
_os.environ.setdefault("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1")

from . import _probelab  # noqa: E402
from ._campaign import CampaignResult, campaign, open_campaign  # noqa: E402
from ._errors import BadInputError, ExpectationFailed, ScenarioError  # noqa: E402
from ._records import Record  # noqa: E402
from ._registry import (causes, chip_presets, chips, detection_kinds, expectation_kinds, injectors,  # noqa: E402
                        ops, probe_options, registries)
from ._run import Dump, Run, Scenario, bundled_scenarios, load_scenario, open_run, run, run_all  # noqa: E402

__version__ = _build_info.VERSION


def source_root():
    """The repository root holding scenarios/ (bundled scenarios, models and campaigns)."""
    return _probelab.source_root()


def to_yaml(value):
    """The YAML text of a dict scenario (or any value) as probelab validates it: the line numbers
    of a ScenarioError raised for a dict refer to this text."""
    return _probelab.to_yaml(value)


def _json_object_text(value, what):
    import json
    if not isinstance(value, dict):
        raise TypeError("%s: expected a dict (as read from its JSON file), got %s" % (what, type(value).__name__))
    return json.dumps(value)


def report_html(report):
    """The self-contained report.html page of a report (a dict as in report.json). Fields the
    page shows that are missing are left out; a field of the wrong type is a ValueError."""
    return _probelab.report_html(_json_object_text(report, "report"))


def campaign_html(summary):
    """The self-contained summary.html page of a campaign summary (a dict as in summary.json);
    a field of the wrong type is a ValueError."""
    return _probelab.campaign_html(_json_object_text(summary, "summary"))


__all__ = [
    "BadInputError", "CampaignResult", "Dump", "ExpectationFailed", "Record", "Run", "Scenario", "ScenarioError",
    "bundled_scenarios", "campaign", "campaign_html", "causes", "chip_presets", "chips", "detection_kinds",
    "expectation_kinds", "injectors", "load_scenario", "open_campaign", "open_run", "ops", "probe_options",
    "registries", "report_html", "run", "run_all", "source_root", "to_yaml",
]
