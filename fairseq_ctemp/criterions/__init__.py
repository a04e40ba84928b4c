from . import tempered_ce  # noqa: F401  (registers --criterion tempered_ce)
