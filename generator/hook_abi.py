"""The driver hook ABI: the fixed C signature of every hook in `model.REQUIRED_HOOKS`.

CUDA-runtime shaped: hooks return an int status (`driver.status` in the spec says which
value is success, not_ready, out_of_memory), except `error_string`, which returns a static
message. Streams and events are opaque handles (``void*``; NULL = the default stream).
The generated C++ declares one function pointer per hook from this table, and
docs/spec.md documents it from the same table.
"""
from __future__ import annotations

from .model import REQUIRED_HOOKS

# hook -> (return type, ((param type, param name), ...))
HOOK_SIGNATURES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "driver_version":     ("int", (("int*", "version"),)),
    "error_string":       ("const char*", (("int", "status"),)),
    "device_count":       ("int", (("int*", "count"),)),
    "set_device":         ("int", (("int", "device"),)),
    "get_device":         ("int", (("int*", "device"),)),
    "device_synchronize": ("int", ()),
    "malloc":             ("int", (("void**", "ptr"), ("size_t", "size"))),
    "free":               ("int", (("void*", "ptr"),)),
    "mem_get_info":       ("int", (("size_t*", "free"), ("size_t*", "total"))),
    "host_malloc":        ("int", (("void**", "ptr"), ("size_t", "size"))),
    "host_free":          ("int", (("void*", "ptr"),)),
    "memcpy":             ("int", (("void*", "dst"), ("const void*", "src"), ("size_t", "n"), ("int", "kind"))),
    "memcpy_async":       ("int", (("void*", "dst"), ("const void*", "src"), ("size_t", "n"), ("int", "kind"),
                                   ("void*", "stream"))),
    "memset_async":       ("int", (("void*", "dst"), ("int", "value"), ("size_t", "n"), ("void*", "stream"))),
    "stream_create":      ("int", (("void**", "stream"),)),
    "stream_destroy":     ("int", (("void*", "stream"),)),
    "stream_synchronize": ("int", (("void*", "stream"),)),
    "stream_query":       ("int", (("void*", "stream"),)),
    "stream_wait_event":  ("int", (("void*", "stream"), ("void*", "event"), ("unsigned int", "flags"))),
    "event_create":       ("int", (("void**", "event"),)),
    "event_destroy":      ("int", (("void*", "event"),)),
    "event_record":       ("int", (("void*", "event"), ("void*", "stream"))),
    "event_query":        ("int", (("void*", "event"),)),
    "event_synchronize":  ("int", (("void*", "event"),)),
    "event_elapsed_time": ("int", (("float*", "ms"), ("void*", "start"), ("void*", "end"))),
}

# hook -> (return type, [param types]): the table the C++ templates use.
HOOK_ABI: dict[str, tuple[str, list[str]]] = {
    h: (ret, [t for t, _ in params]) for h, (ret, params) in HOOK_SIGNATURES.items()
}

# What the returned status means beyond success/failure.
HOOK_NOTES: dict[str, str] = {
    "error_string": "returns a static string; never NULL",
    "malloc": "status.out_of_memory when the device is full",
    "host_malloc": "status.out_of_memory when pinned memory is exhausted",
    "memcpy": "kind: one of driver.memcpy_kinds",
    "memcpy_async": "kind: one of driver.memcpy_kinds; stream NULL = default stream",
    "stream_query": "status.success if idle, status.not_ready if work is pending",
    "event_query": "status.success if completed, status.not_ready otherwise",
    "stream_wait_event": "flags: always 0 (as cudaStreamWaitEvent's default)",
    "driver_version": "MAJOR*1000 + MINOR*10 (2.1 -> 2010)",
}

assert tuple(HOOK_SIGNATURES) == REQUIRED_HOOKS, "hook ABI table out of sync with REQUIRED_HOOKS"


def c_params(hook: str, names: bool = True) -> str:
    """The parameter list of ``hook``, e.g. "void** ptr, size_t size" ("void" if none)."""
    _, params = HOOK_SIGNATURES[hook]
    if not params:
        return "void"
    return ", ".join(f"{t} {n}" if names else t for t, n in params)


def c_function_type(hook: str) -> str:
    """The C function type of ``hook``, e.g. "int (void** ptr, size_t size)"."""
    return f"{HOOK_SIGNATURES[hook][0]} ({c_params(hook)})"


def c_pointer_typedef(hook: str, name: str) -> str:
    """A typedef of a pointer to ``hook``: "typedef int (*name)(void**, size_t);"."""
    return f"typedef {HOOK_SIGNATURES[hook][0]} (*{name})({c_params(hook, names=False)});"


def c_declaration(hook: str, symbol: str) -> str:
    """An extern "C"-style declaration of ``symbol`` with the hook's signature."""
    return f"{HOOK_SIGNATURES[hook][0]} {symbol}({c_params(hook)});"
