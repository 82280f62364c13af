"""The registries, as ``probelab list`` prints them: chip parameters and presets, ops, injectors,
probe options, expectation kinds, detection kinds and diagnosis causes."""

import functools
import json

from . import _probelab
from ._records import wrap


@functools.lru_cache(maxsize=1)
def _catalog():
    return json.loads(_probelab.catalog())


def registries():
    """Every registry in one dict: chips {presets, params}, ops, injectors, probe_options,
    expectations {kinds, detection_kinds, causes}."""
    return wrap(_catalog())


def chips():
    """Chip parameters (scenario ``chip: {overrides: {name: value}}``): name, type, unit, default
    (ascend910b), doc, source, min/max or choices."""
    return wrap(_catalog()["chips"]["params"])


def chip_presets():
    """Chip presets (scenario ``chip: {preset: NAME}``): name and the parameters it changes."""
    return wrap(_catalog()["chips"]["presets"])


def ops():
    """Op types a model may use: type, doc, backward, aliases, inputs, outputs, attrs."""
    return wrap(_catalog()["ops"])


def injectors():
    """Injector kinds (scenario ``injections: [{kind: ...}]``): name, doc, params."""
    return wrap(_catalog()["injectors"])


def probe_options():
    """Keys of the scenario's ``probes:`` section, each with its doc."""
    return wrap(_catalog()["probe_options"])


def expectation_kinds():
    """Expectation kinds (scenario ``expectations:``): kind, doc."""
    return wrap(_catalog()["expectations"]["kinds"])


def detection_kinds():
    """Kinds a detection expectation may name."""
    return list(_catalog()["expectations"]["detection_kinds"])


def causes():
    """Cause classes of the diagnosis (what a diagnosis expectation may name)."""
    return list(_catalog()["expectations"]["causes"])
