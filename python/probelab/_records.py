"""Records: report entries as dicts that also read as attributes (``a.op`` for ``a["op"]``)."""

import json


class Record(dict):
    """A dict whose keys read as attributes; nested dicts are Records too, lists of dicts lists
    of Records. Keys a newer report adds are there without any change here."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError("%s has no field %r (fields: %s)"
                                 % (type(self).__name__, name, ", ".join(sorted(self)))) from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self))


def wrap(value):
    """JSON-like data with every dict turned into a Record."""
    if isinstance(value, dict) and not isinstance(value, Record):
        return Record((k, wrap(v)) for k, v in value.items())
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value


def read_json(path):
    """A JSON file (report.json, summary.json) as plain data."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)
