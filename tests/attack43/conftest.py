"""Fixtures of the issue 43 attack: the 41-photo folder the loader tests use, shared here."""

from __future__ import annotations

from tests.loader.conftest import forty_one  # noqa: F401  (fixture)
