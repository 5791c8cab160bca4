"""Checks of `driver.version` the schema cannot express (its overlays: `driver_versions.py`)."""
from __future__ import annotations

import re

from ..errors import SpecError
from ..yaml_loader import YamlDocument
from ._common import get


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """driver.version must fit the MAJOR*1000 + MINOR*10 encoding of the driver's version."""
    out: list[SpecError] = []
    version = get(data, "driver", "version")
    if isinstance(version, str) and re.fullmatch(r"[0-9]+\.[0-9]+", version):
        if int(version.partition(".")[2]) >= 100:
            out.append(doc.error(("driver", "version"), f"minor version of '{version}' must be below 100 "
                                 "(it is encoded as MAJOR*1000 + MINOR*10)"))
    return out
