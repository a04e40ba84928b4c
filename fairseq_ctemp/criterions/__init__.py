from . import ct_cross_entropy, tempered_ce  # noqa: F401  (registers --criterion ct_cross_entropy, tempered_ce)
