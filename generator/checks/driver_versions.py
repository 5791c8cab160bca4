"""Checks of `driver.versions`: the overlays, one per further driver version, their versions, ops and dtypes."""
from __future__ import annotations

import re

from ..errors import SpecError
from ..yaml_loader import YamlDocument
from ..limits import MAX_DRIVER_VERSIONS
from . import driver as driver_check
from . import dtypes as dtypes_check
from . import ops as ops_check
from ._common import get


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """Each overlay: a version other than driver.version that fits its encoding, op entries
    that pass the checks of `ops`, removals of ops `ops` names, dtypes that keep amp's."""
    from .. import torch_ops

    ops = data.get("ops")
    ops = ops if isinstance(ops, dict) else {}
    out: list[SpecError] = []
    versions = get(data, "driver", "versions")
    if not isinstance(versions, dict):
        return out
    default = get(data, "driver", "version")
    for n, (version, overlay) in enumerate(versions.items()):
        path = ("driver", "versions", version)
        if n == MAX_DRIVER_VERSIONS:
            out.append(doc.error(path, f"more than {MAX_DRIVER_VERSIONS} driver versions, the most a spec may "
                                 "declare (limits.MAX_DRIVER_VERSIONS)", at="key"))
            break
        if not re.fullmatch(r"[0-9]+\.[0-9]+", version):
            continue  # reported by the schema
        if version == default:
            out.append(doc.error(path, f"'{version}' is driver.version itself", at="key",
                                 hint="an overlay describes another driver version"))
        else:
            out += driver_check.version_errors(doc, data, path, version, at="key")
        if not isinstance(overlay, dict):
            continue
        overlay_ops = overlay.get("ops")
        if isinstance(overlay_ops, dict):
            out += ops_check.entry_errors(doc, overlay_ops, path + ("ops",))
            for op, entry in overlay_ops.items():
                if entry is None and op not in ops and torch_ops.lookup(op) is not None:
                    out.append(doc.error(path + ("ops", op), f"'{op}' is removed for driver {version} but "
                                         "`ops` does not name it", at="key"))
            if any(isinstance(e, dict) and e.get("kernel") for e in overlay_ops.values()) and "kernels" not in data:
                out.append(doc.error(path + ("ops",), "an op has a kernel but the spec has no 'kernels' section",
                                     at="key"))
        overlay_dtypes = overlay.get("dtypes")
        out += dtypes_check.floating_errors(doc, overlay_dtypes, path + ("dtypes",))
        amp_dtypes = get(data, "amp", "dtypes")
        if isinstance(overlay_dtypes, list) and isinstance(amp_dtypes, list):
            for dt in amp_dtypes:
                if isinstance(dt, str) and dt not in overlay_dtypes:
                    out.append(doc.error(path + ("dtypes",), f"amp dtype '{dt}' is not among driver {version}'s "
                                         "dtypes", hint="list it, or drop it from amp.dtypes"))
    return out
