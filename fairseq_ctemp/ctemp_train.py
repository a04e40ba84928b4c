"""What ctemp-train changes in fairseq-train while it runs, in one place: the ALT recipes' training
processes run fairseq-train inside the same block."""

import contextlib

from . import early_stopping, exact_resume, example_sizes


@contextlib.contextmanager
def changes():
    """The patience count carried in the checkpoints (early_stopping), the exact resume
    (exact_resume), examples too long for the model or a batch refused in one line and those that
    fairseq's batching leaves out told (example_sizes)."""
    with early_stopping.carried_in_checkpoints(), exact_resume.turned_on(), example_sizes.checked():
        yield
