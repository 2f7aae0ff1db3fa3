"""Fixtures of tests/user43: the clients' environment of tests/clients (the 41-image folder and the Lightning predict
run of tests/loader come from tests/conftest.py, one fixture for every folder)."""

from tests.clients.conftest import client_env  # noqa: F401  (fixture)
