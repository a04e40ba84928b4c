"""The two checks every typed record read back from JSON makes: which entries are its fields (a file
written by a newer version may hold more) and which of its fields without a default are missing."""

import dataclasses


def known(cls, d):
    """The entries of d that are fields of the dataclass cls."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def missing(cls, d):
    """The names of cls's fields without a default that d lacks, in field order."""
    no_default = dataclasses.MISSING
    required = (
        f for f in dataclasses.fields(cls) if f.default is no_default and f.default_factory is no_default
    )
    return [f.name for f in required if f.name not in d]
