"""Post-hoc temperature scaling of a fairseq checkpoint and its calibration (Guo, Pleiss, Sun and
Weinberger, "On Calibration of Modern Neural Networks", ICML 2017), teacher forced over every target
token of a subset (EOS included, padding excluded). D is the log-probability the model gives at an
explicit t = 1: its logits up to a per-row constant (which softmax(D / t) ignores), or for a
temperature-head LM the log of its final distribution, so that t acts as the exponent p^(1/t)
renormalised, as ``--temperature`` does there.

    nll     mean -log softmax(D / t0)[y] in nats, t0 the temperature the checkpoint decodes at by
            default (the decoding rule: a recorded t*, else a tempered_ce T, else 1)
    ece     sum over 15 equal-width bins of |bin| / N * |accuracy - mean confidence| of the top-1
            prediction; bin m holds confidences in [m/15, (m+1)/15), the last bin also 1
    t*      argmin_t of mean -log softmax(D / t)[y]

The NLL is convex in beta = 1/t (the log-partition is convex in beta): its derivative is the mean of
E_q[D] - D_y and its second derivative the mean of Var_q[D], q = softmax(beta D). The first pass
evaluates a grid of beta (which brackets beta*) at the cost of a few softmaxes per batch; then each
pass is one Newton step on beta, kept inside the bracket, until the step is below 1e-6 beta.
Only one chunk of one batch is ever held as a tokens x vocabulary matrix; per token, the confidence
and whether the top-1 prediction is right are kept for the reliability bins.

``calibrate`` runs it on a checkpoint through fairseq's Python API; ``write_calibrated_checkpoint``
writes a copy that decodes at t* (``decoding.CALIBRATION_GROUP``). One job per module: fitting.py (the
streaming sums and the fit of t*), reliability.py (the bins, the ECE, the diagram), loading.py (the
checkpoint, the data and the teacher-forced scores, through fairseq), measure.py (``calibrate``) and
checkpoint.py (the calibrated copy).
"""


class CalibrationError(Exception):
    """Bad input, or a model that cannot be calibrated: one line naming the option or file."""


from .checkpoint import write_calibrated_checkpoint  # noqa: E402
from .fitting import Pass, fit, scan  # noqa: E402
from .measure import Calibration, HeldOut, calibrate  # noqa: E402
from .reliability import N_BINS, draw_reliability, expected_calibration_error, reliability_bins  # noqa: E402

__all__ = [
    "N_BINS",
    "Calibration",
    "CalibrationError",
    "HeldOut",
    "Pass",
    "calibrate",
    "draw_reliability",
    "expected_calibration_error",
    "fit",
    "reliability_bins",
    "scan",
    "write_calibrated_checkpoint",
]
