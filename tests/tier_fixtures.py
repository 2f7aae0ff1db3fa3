"""The crop-resize's CPU tier put back after a test that caps it (tests/conftest.py imports the fixture)."""

from __future__ import annotations

import pytest

from dataio.formats.jpeg import cpu_tier


@pytest.fixture
def restored_tier():
    """The process's tier put back to the CPU's after the test."""
    yield
    cpu_tier.use_tier("vbmi")  # a cap above the CPU's is the CPU's
