"""Checks of `driver.version` the schema cannot express (its overlays: `driver_versions.py`)."""
from __future__ import annotations

import re

from ..errors import SpecError
from ..limits import C_INT_MAX, MAX_VERSION_DIGITS
from ..model import VERSION_SCALES
from ..yaml_loader import YamlDocument
from ._common import get


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """driver.version must fit the encoding of the driver's version in the generated C++ int."""
    return version_errors(doc, data, ("driver", "version"), get(data, "driver", "version"))


def version_errors(doc: YamlDocument, data: dict, path: tuple, version, at: str = "value") -> list[SpecError]:
    """A MAJOR.MINOR ``version`` written at ``path``: short components, a minor below 100, and an
    encoding (`driver.version_encoding`, with any patch level) that fits a C int; the generated
    driver.cpp holds it in one (3000000.0 overflowed it)."""
    if not isinstance(version, str) or not re.fullmatch(r"[0-9]+\.[0-9]+", version):
        return []  # reported by the schema
    major, _, minor = version.partition(".")
    if max(len(major), len(minor)) > MAX_VERSION_DIGITS:
        return [doc.error(path, f"version '{version[:40]}' has a component of more than {MAX_VERSION_DIGITS} "
                          "digits (limits.MAX_VERSION_DIGITS)", at=at)]
    encoding = get(data, "driver", "version_encoding")
    encoding = encoding if isinstance(encoding, str) and encoding in VERSION_SCALES else "cuda"
    major_scale, minor_scale = VERSION_SCALES[encoding]
    if int(minor) >= 100:
        return [doc.error(path, f"minor version of '{version}' must be below 100 "
                          f"(it is encoded as MAJOR*{major_scale} + MINOR*{minor_scale})", at=at)]
    # the largest value the driver_version hook may report for this version (any patch level)
    code = int(major) * major_scale + int(minor) * minor_scale + minor_scale - 1
    if code > C_INT_MAX:
        largest = (C_INT_MAX - 99 * minor_scale - minor_scale + 1) // major_scale
        return [doc.error(path, f"version '{version}' does not fit the driver_version hook's C int: encoded "
                          f"as MAJOR*{major_scale} + MINOR*{minor_scale} it reaches {code}, over {C_INT_MAX}",
                          hint=f"with version_encoding {encoding}, MAJOR is at most {largest}", at=at)]
    return []
