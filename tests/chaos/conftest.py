from tests.integration.conftest import start_cluster  # noqa: F401  (the same fixture)
