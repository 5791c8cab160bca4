"""The collective library's hook ABI: the fixed C signature of every hook `distributed.library`
names. NCCL-shaped on purpose (argument order, status codes), so a chip whose library is NCCL
(or RCCL, HCCL, ...) names its symbols and nothing else: results are int statuses
(`library.status`), communicators and streams opaque handles, the unique id a fixed-size
struct passed by value (`library.unique_id_bytes`), dtypes and reduce ops the library's own
codes (`library.dtypes`, `library.reduce_ops`). The generated C++ declares one function
pointer per hook from this table, and docs/spec.md documents it from the same table.
"""
from __future__ import annotations

# Hooks every library must provide, in the order the generated code declares them.
REQUIRED_COLLECTIVE_HOOKS = (
    "get_unique_id", "comm_init_rank", "comm_destroy", "comm_abort", "comm_get_async_error",
    "error_string", "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
    "send", "recv", "group_start", "group_end",
)
# Hooks a library may lack: all_to_all is then sends and receives in one group (NCCL has none);
# without get_last_error, errors carry the status text only.
OPTIONAL_COLLECTIVE_HOOKS = ("all_to_all", "get_last_error")
COLLECTIVE_HOOKS = REQUIRED_COLLECTIVE_HOOKS + OPTIONAL_COLLECTIVE_HOOKS

# What a library call's reduction may be, as torch.distributed.ReduceOp names them.
REDUCE_OPS = ("sum", "prod", "max", "min", "avg")

_BUFFERS = (("const void*", "sendbuff"), ("void*", "recvbuff"))
_TAIL = (("void*", "comm"), ("void*", "stream"))

# hook -> (return type, ((param type, param name), ...)); `unique_id` is the library's id struct,
# `unique_id_bytes` bytes, passed by value.
COLLECTIVE_SIGNATURES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "get_unique_id":        ("int", (("unique_id*", "id"),)),
    "comm_init_rank":       ("int", (("void**", "comm"), ("int", "nranks"), ("unique_id", "id"), ("int", "rank"))),
    "comm_destroy":         ("int", (("void*", "comm"),)),
    "comm_abort":           ("int", (("void*", "comm"),)),
    "comm_get_async_error": ("int", (("void*", "comm"), ("int*", "async_error"))),
    "error_string":         ("const char*", (("int", "status"),)),
    "all_reduce":           ("int", (*_BUFFERS, ("size_t", "count"), ("int", "datatype"), ("int", "op"), *_TAIL)),
    "broadcast":            ("int", (*_BUFFERS, ("size_t", "count"), ("int", "datatype"), ("int", "root"), *_TAIL)),
    "reduce":               ("int", (*_BUFFERS, ("size_t", "count"), ("int", "datatype"), ("int", "op"),
                                     ("int", "root"), *_TAIL)),
    "all_gather":           ("int", (*_BUFFERS, ("size_t", "sendcount"), ("int", "datatype"), *_TAIL)),
    "reduce_scatter":       ("int", (*_BUFFERS, ("size_t", "recvcount"), ("int", "datatype"), ("int", "op"), *_TAIL)),
    "send":                 ("int", (("const void*", "sendbuff"), ("size_t", "count"), ("int", "datatype"),
                                     ("int", "peer"), *_TAIL)),
    "recv":                 ("int", (("void*", "recvbuff"), ("size_t", "count"), ("int", "datatype"),
                                     ("int", "peer"), *_TAIL)),
    "group_start":          ("int", ()),
    "group_end":            ("int", ()),
    "all_to_all":           ("int", (*_BUFFERS, ("size_t", "count"), ("int", "datatype"), *_TAIL)),
    "get_last_error":       ("const char*", (("void*", "comm"),)),
}

# What a hook does, beyond its signature: docs/spec.md's hook table and the schema's descriptions.
COLLECTIVE_HOOK_NOTES: dict[str, str] = {
    "get_unique_id": "writes a new communicator id (rank 0 calls it; the store carries it to the others)",
    "comm_init_rank": "joins communicator `id` as `rank` of `nranks` on the current device; collective "
                      "(returns once every rank joined)",
    "comm_destroy": "frees the communicator once its queued work is done",
    "comm_abort": "frees the communicator at once, never blocking; its queued work fails, peers see an error",
    "comm_get_async_error": "writes the status of the communicator's queued work (status.in_progress "
                            "while some is still running, success when none failed)",
    "error_string": "returns a static message for a status; never NULL",
    "all_reduce": "stream-ordered, asynchronous: enqueues on `stream` and returns; count elements",
    "broadcast": "from `root`'s sendbuff to every rank's recvbuff",
    "reduce": "the reduction lands in `root`'s recvbuff",
    "all_gather": "recvbuff holds nranks * sendcount elements, rank order",
    "reduce_scatter": "sendbuff holds nranks * recvcount elements; rank r keeps block r",
    "send": "to `peer`; matched by a recv there",
    "recv": "from `peer`",
    "group_start": "calls until group_end are fused into one unit (a send and a recv cannot deadlock)",
    "group_end": "enqueues the group's calls",
    "all_to_all": "optional: count elements to and from each peer (sendbuff and recvbuff hold nranks * "
                  "count); without it the backend sends and receives in one group",
    "get_last_error": "optional: the detail of the communicator's last failure (which peer, which op), as "
                      "ncclGetLastError; never NULL",
}

assert set(COLLECTIVE_SIGNATURES) == set(COLLECTIVE_HOOKS) == set(COLLECTIVE_HOOK_NOTES)


def c_function_type(hook: str) -> str:
    """The C function type of ``hook``, e.g. "int (void* comm)"."""
    ret, params = COLLECTIVE_SIGNATURES[hook]
    return f"{ret} ({', '.join(f'{t} {n}' for t, n in params) or 'void'})"
