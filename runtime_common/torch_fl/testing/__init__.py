"""The test harness every generated chip suite shares: `suite` (its pytest setup: hooks,
fixtures, the OpInfo results file), `opinfo` (torch's op_db against the CPU), `device`,
`torch_api` and `upstream` (device semantics, torch's device-generic API, PyTorch's reference-
backend tests), `vendor_ops` (each vendor kernel against the CPU, for the generated cases) and
`common` (their shared helpers). A generated suite's conftest.py and test files are shims over
these modules; what differs between chips comes from the chip's spec module."""
