"""The test suite's summary counts skips by reason (tests/conftest.py), one line each."""

from __future__ import annotations

import inspect

import conftest

pytest_plugins = ["pytester"]


def test_skips_are_counted_by_reason(pytester):
    pytester.makeconftest("from collections import Counter\n\n"
                          + inspect.getsource(conftest.pytest_terminal_summary))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("i", range(3))
        @pytest.mark.skipif(True, reason="no GPU here")
        def test_gpu(i):
            pass

        def test_other():
            pytest.skip("something else")

        def test_runs():
            assert True
        """
    )
    result = pytester.runpytest("-q")
    result.assert_outcomes(passed=1, skipped=4)
    lines = result.stdout.lines
    assert sum("no GPU here" in line for line in lines) == 1
    result.stdout.fnmatch_lines(["*skipped, by reason*", "    3  no GPU here",
                                 "    1  something else"])
