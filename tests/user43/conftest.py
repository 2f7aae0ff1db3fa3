"""Fixtures of tests/user43: the 41-image folder of tests/loader, the clients' environment of tests/clients."""

from tests.clients.conftest import client_env  # noqa: F401  (fixture)
from tests.loader.conftest import forty_one  # noqa: F401  (fixture)
