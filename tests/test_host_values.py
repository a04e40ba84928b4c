"""The criteria's logged values reach fairseq's meters as numbers copied to the host in one go: a
tensor meter, or a tensor converted by float() or .item(), would wait on the device by itself."""

import math
from unittest import mock

import pytest
import torch
from fairseq import metrics

from fairseq_ctemp.criterions.ct_cross_entropy import ContextualTemperatureCrossEntropy
from fairseq_ctemp.criterions.host_values import host_floats
from fairseq_ctemp.criterions.tempered_ce import TemperedCrossEntropyCriterion


def test_host_floats_are_exact_and_in_order():
    values = [torch.tensor([2.5]), 0, 1.5, torch.tensor(2**24 + 1), torch.tensor(0.1)]
    assert host_floats(values) == [2.5, 0.0, 1.5, 2**24 + 1, float(torch.tensor(0.1))]
    assert host_floats([0, 3]) == [0.0, 3.0] and host_floats([]) == []


def one_by_one_is_refused():
    """Patches that make a tensor's own conversion to a number fail (the transfer must be joint)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor converted to a number by itself")

    return mock.patch.multiple(torch.Tensor, __float__=refuse, item=refuse)


def reduced(criterion, logs):
    with one_by_one_is_refused(), metrics.aggregate() as agg:
        criterion.reduce_metrics(logs)
    return agg


def test_tempered_ce_diagnostics():
    logs = [
        {"loss": 3.0, "nll_loss": 2.0, "ntokens": 5, "sample_size": 5, "entropy": torch.tensor(1.5)},
        {"loss": 1.0, "nll_loss": 1.0, "ntokens": 3, "sample_size": 3, "entropy": torch.tensor(0.5)},
    ]
    for log in logs:
        log["entropy_untempered"], log["nll_loss_untempered"] = log["entropy"] * 2, log["entropy"] * 3
    agg = reduced(TemperedCrossEntropyCriterion, logs)
    for key, total in (("entropy", 2.0), ("entropy_untempered", 4.0), ("nll_loss_untempered", 6.0)):
        assert type(agg[key].sum) is float, key
        assert math.isclose(agg[key].avg, total / 8 / math.log(2), rel_tol=1e-9), key


@pytest.mark.parametrize("regularization", [False, True])
def test_ct_cross_entropy_logs(regularization):
    logs = []
    for n, loss in ((5, 7.0), (3, 2.0)):
        log = {"ntokens": n, "sample_size": n, "loss": torch.tensor(loss), "nll_loss": torch.tensor(loss / 2)}
        log.update({k: torch.tensor(n * 1.25) for k in ("loss_scale", "tau_mean", "tau_min", "tau_max")})
        if regularization:
            log["regularization"] = torch.tensor(0.5 * n)
        logs.append(log)
    agg = reduced(ContextualTemperatureCrossEntropy, logs)
    assert math.isclose(agg["loss"].avg, 9.0 / 8 / math.log(2), rel_tol=1e-9)
    assert math.isclose(agg["nll_loss"].avg, 4.5 / 8 / math.log(2), rel_tol=1e-9)
    for key in ("loss_scale", "tau_mean", "tau_min", "tau_max"):
        assert type(agg[key].sum) is float and math.isclose(agg[key].avg, 1.25, rel_tol=1e-9), key
    assert ("regularization" in agg) == regularization
    if regularization:
        assert math.isclose(agg["regularization"].avg, 0.5 / math.log(2), rel_tol=1e-9)
