"""The test harness every generated chip suite shares: `suite` (its pytest setup: hooks,
fixtures, the OpInfo results file) and `opinfo` (torch's op_db against the CPU). A generated
suite's conftest.py and test_opinfo.py are shims over these modules."""
