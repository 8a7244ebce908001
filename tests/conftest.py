import os
import sys
from pathlib import Path

import pytest

# Test helper modules (corpus.py, pcapgen.py) live beside the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# A test that cannot run because an independent oracle (tshark, tcpdump, the real broker and client, openssl,
# grpc_tools) is missing skips with a reason starting with this. In CI (CI=true) that is a failure: a green
# run must mean the cross-checks ran.
ORACLE_MISSING = "oracle missing: "


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if ORACLE_MISSING in reason:
            report.outcome = "failed"
            report.longrepr = f"in CI an oracle must be installed, not skipped: {reason}"
