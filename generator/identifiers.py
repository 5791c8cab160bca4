"""Names a spec gives to things in generated Python and C++: the target languages' keywords
and the names torch already owns.

A spec's identifiers are checked twice: by the schema's patterns (full-match: `patterns`),
and here, against the keywords of the language each one reaches (`checks/names.py` says
which field reaches which) and, for the chip's name, against torch's own names.
"""
from __future__ import annotations

import keyword
import warnings

# Python: the keywords, and the soft keywords (match, case, _, and type since 3.12) a name
# would have to dodge in some positions; written out so that the answer does not depend on
# the Python that runs the generator.
PYTHON_KEYWORDS = frozenset(keyword.kwlist) | frozenset(getattr(keyword, "softkwlist", ())) | frozenset({
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
    "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with",
    "yield", "match", "case", "type", "_",
})

# C++ (C++23 keywords, the alternative operator tokens, C's keywords compilers take in C++,
# and the identifiers with a special meaning that cannot name a function: final, override, import,
# module are contextual and allowed).
CPP_KEYWORDS = frozenset({
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case",
    "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const",
    "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await", "co_return",
    "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum",
    "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int",
    "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "return",
    "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch",
    "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
    "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    # C keywords g++ and clang++ also reserve
    "restrict", "_Alignas", "_Alignof", "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary",
    "_Noreturn", "_Static_assert", "_Thread_local", "__restrict", "__restrict__", "typeof",
    "__attribute__", "__asm__", "__typeof__", "__declspec",
})


def python_keyword(name: str) -> bool:
    return name in PYTHON_KEYWORDS


def cpp_keyword(name: str) -> bool:
    return name in CPP_KEYWORDS


def cpp_reserved(name: str) -> bool:
    """Identifiers C++ reserves for the compiler and its library (`__x`, `_X`, `a__b`):
    `__builtin_trap` as a kernel name would name a compiler builtin."""
    return "__" in name or (len(name) > 1 and name[0] == "_" and name[1].isupper())


def torch_name_owner(name: str) -> str | None:
    """Where torch already uses ``name`` (`torch.nn`, `Tensor.is_leaf`), or None.

    A privateuse1 backend called NAME becomes `torch.NAME` and gets `Tensor.NAME()`,
    `Tensor.is_NAME`, `Module.NAME()`, and storage methods of both names (torch's
    `rename_privateuse1_backend` and `generate_methods_for_privateuse1_backend`, which the
    runtime calls); torch refuses a name it already has, so the backend failed at load. Read
    from the installed torch, like the ops."""
    import torch
    from torch.nn.utils.rnn import PackedSequence

    if name == torch._C._get_privateuse1_backend_name():
        return None   # this very backend, already registered in this process: its own names
    owners = (("torch", torch), ("torch.Tensor", torch.Tensor), ("torch.nn.Module", torch.nn.Module),
              ("PackedSequence", PackedSequence), ("torch.TypedStorage", torch.TypedStorage),
              ("torch.UntypedStorage", torch.UntypedStorage))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, owner in owners:
            for attr in (name,) if owner is torch else (name, f"is_{name}"):
                try:
                    if hasattr(owner, attr):
                        return f"{label}.{attr}"
                except Exception:   # a lazy attribute that fails to import is still taken
                    return f"{label}.{attr}"
    return None
