"""Checks of `dtypes` the schema cannot express."""
from __future__ import annotations

from ..errors import SpecError
from ..model import FLOATING_DTYPES
from ..yaml_loader import YamlDocument


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """The chip computes in at least one floating dtype."""
    out: list[SpecError] = []
    dtypes = data.get("dtypes")
    if isinstance(dtypes, list) and dtypes and all(isinstance(d, str) for d in dtypes) \
            and not set(dtypes) & set(FLOATING_DTYPES):
        out.append(doc.error(("dtypes",), "the chip lists no floating dtype; autograd, optimizers and the "
                             "generated tests compute in one",
                             hint="add one of " + ", ".join(FLOATING_DTYPES)))
    return out
