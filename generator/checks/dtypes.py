"""Checks of `dtypes` the schema cannot express."""
from __future__ import annotations

from ..errors import SpecError
from ..model import FLOATING_DTYPES
from ..yaml_loader import YamlDocument


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """The chip computes in at least one floating dtype."""
    return floating_errors(doc, data.get("dtypes"), ("dtypes",))


def floating_errors(doc: YamlDocument, dtypes, path: tuple) -> list[SpecError]:
    """A dtype list (the spec's, or a driver overlay's) holds a floating dtype."""
    if isinstance(dtypes, list) and dtypes and all(isinstance(d, str) for d in dtypes) \
            and not set(dtypes) & set(FLOATING_DTYPES):
        return [doc.error(path, "the chip lists no floating dtype; autograd, optimizers and the "
                          "generated tests compute in one", hint="add one of " + ", ".join(FLOATING_DTYPES))]
    return []
