from tests.attack.helpers import views_shards  # noqa: F401  (fixture)
