"""tempered_ce, the specification as tests (the loss of fairseq_ctemp/criterions/tempered_ce.py)."""

import itertools
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
from fairseq.data import Dictionary
from fairseq.models import BaseFairseqModel, FairseqDecoder

import fairseq_ctemp  # noqa: F401
from fairseq_ctemp.criterions.tempered_ce import TemperedCrossEntropyCriterion

PAD = 1


class LogitsModel(BaseFairseqModel):
    """A 'model' whose decoder output is a given logits tensor, normalised the fairseq way."""

    def __init__(self, logits, dictionary):
        super().__init__()
        self.logits = torch.nn.Parameter(logits)
        self.decoder = FairseqDecoder(dictionary)

    def forward(self, **unused):
        return self.logits, None


def make_task(vocab):
    dictionary = Dictionary()
    for i in range(vocab - len(dictionary)):
        dictionary.add_symbol(f"w{i}")
    assert len(dictionary) == vocab and dictionary.pad() == PAD
    return SimpleNamespace(target_dictionary=dictionary), dictionary


def random_batch(batch, length, vocab, seed, scale=3.0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.randn(batch, length, vocab, generator=gen) * scale).to(dtype)
    target = torch.randint(4, vocab, (batch, length), generator=gen)
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    target[torch.arange(length)[None, :] >= lengths[:, None]] = PAD  # right padding
    sample = {"net_input": {}, "target": target, "ntokens": int(target.ne(PAD).sum())}
    return logits, sample


def make_criterion(task, T=1.0, eps=0.0, w=0.0, rescale=True, **kw):
    return TemperedCrossEntropyCriterion(
        task,
        sentence_avg=False,
        label_smoothing=eps,
        softmax_temperature=T,
        sem_weight=w,
        no_temperature_rescale=not rescale,
        **kw,
    )


def loss_and_grad(criterion, logits, sample, dictionary):
    model = LogitsModel(logits.clone(), dictionary)
    loss, sample_size, log = criterion(model, sample)
    loss.backward()
    return loss, model.logits.grad, log


def slow_reference(logits, target, T, eps, w, rescale=True):
    """The loss of the tempered_ce docstring written out position by position, in float64."""
    V = logits.size(-1)
    loss = nll = ent = ent_untempered = nll_untempered = torch.zeros((), dtype=torch.float64)
    for b in range(logits.size(0)):
        for t in range(logits.size(1)):
            y = int(target[b, t])
            if y == PAD:
                continue
            d = logits[b, t].double()
            log_p = torch.log_softmax(d / T, dim=0)
            p = log_p.exp()
            l_x = -(1 - eps - eps / (V - 1)) * log_p[y] - eps / (V - 1) * log_p.sum()
            l_nse = (p * log_p).sum()
            loss = loss + (T if rescale else 1.0) * ((1 - w) * l_x + w * l_nse)
            nll = nll - log_p[y]
            ent = ent - l_nse
            log_q = torch.log_softmax(d, dim=0)
            ent_untempered = ent_untempered - (log_q.exp() * log_q).sum()
            nll_untempered = nll_untempered - log_q[y]
    return loss, nll, ent, ent_untempered, nll_untempered


@pytest.mark.parametrize(
    "shape,T,eps,w,rescale",
    [
        ((2, 5, 11), 1.0, 0.0, 0.0, True),
        ((3, 4, 17), 2.5, 0.1, 0.0, True),
        ((1, 7, 9), 0.5, 0.3, 0.3, True),
        ((4, 3, 23), 4.0, 0.1, 0.9, True),
        ((2, 6, 13), 7.0, 0.2, 0.5, False),
    ],
)
def test_loss_gradients_and_logged_stats_match_slow_reference(shape, T, eps, w, rescale):
    task, dictionary = make_task(shape[-1])
    logits, sample = random_batch(*shape, seed=hash((shape, T)) % 1000)
    criterion = make_criterion(task, T, eps, w, rescale)
    loss, grad, log = loss_and_grad(criterion, logits, sample, dictionary)

    ref_logits = logits.double().requires_grad_()
    ref = slow_reference(ref_logits, sample["target"], T, eps, w, rescale)
    ref[0].backward()
    torch.testing.assert_close(loss.double(), ref[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad.double(), ref_logits.grad, rtol=1e-4, atol=1e-6)
    for key, value in zip(("nll_loss", "entropy", "entropy_untempered", "nll_loss_untempered"), ref[1:]):
        torch.testing.assert_close(log[key].double(), value.detach(), rtol=1e-5, atol=1e-5)
    # padding contributes nothing: its logits get exactly zero gradient
    assert grad[sample["target"].eq(PAD)].abs().max() == 0


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"report_accuracy": True},
        {"ignore_prefix_size": 1},
    ],
)
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_equals_label_smoothed_cross_entropy_at_T1(options, eps):
    task, dictionary = make_task(19)
    logits, sample = random_batch(3, 6, 19, seed=7)
    ours = make_criterion(task, 1.0, eps, 0.0, **options)
    stock = LabelSmoothedCrossEntropyCriterion(task, False, eps, **options)
    loss, grad, log = loss_and_grad(ours, logits, sample, dictionary)
    stock_loss, stock_grad, stock_log = loss_and_grad(stock, logits, sample, dictionary)
    assert torch.equal(loss, stock_loss)
    assert torch.equal(grad, stock_grad)
    for key in stock_log:
        assert torch.equal(torch.as_tensor(log[key]), torch.as_tensor(stock_log[key])), key
    # untempered statistics coincide with the tempered ones at T = 1
    assert torch.equal(log["nll_loss_untempered"], log["nll_loss"])
    assert torch.equal(log["entropy_untempered"], log["entropy"])


def slow_token_losses(logits, target, T, eps, w):
    """Each position's loss of the tempered_ce docstring (T-rescaled), in float64; 0 at padding."""
    V = logits.size(-1)
    losses = torch.zeros(target.numel(), dtype=torch.float64)
    for i, (d, y) in enumerate(zip(logits.reshape(-1, V).double(), target.reshape(-1).tolist())):
        if y != PAD:
            log_p = torch.log_softmax(d / T, dim=0)
            l_x = -(1 - eps - eps / (V - 1)) * log_p[y] - eps / (V - 1) * log_p.sum()
            losses[i] = T * ((1 - w) * l_x + w * (log_p.exp() * log_p).sum())
    return losses


@pytest.mark.parametrize("T,eps,w", [(1.0, 0.1, 0.0), (3.0, 0.1, 0.0), (0.5, 0.2, 0.4)])
def test_unreduced_losses_are_each_positions_loss(T, eps, w):
    """forward(reduce=False), fairseq's criterion API for per-token losses (one entry per target
    position, as label_smoothed_cross_entropy returns them): each position's loss, 0 at padding."""
    task, dictionary = make_task(13)
    logits, sample = random_batch(3, 5, 13, seed=5)
    criterion = make_criterion(task, T, eps, w)
    loss, sample_size, log = criterion(LogitsModel(logits, dictionary), sample, reduce=False)
    assert loss.shape == (sample["target"].numel(), 1) and sample_size == sample["ntokens"]
    expected = slow_token_losses(logits, sample["target"], T, eps, w)
    torch.testing.assert_close(loss.squeeze(-1).double(), expected, rtol=1e-5, atol=1e-6)
    if T == 1.0:  # and at T = 1 fairseq's own, to the bit
        stock = LabelSmoothedCrossEntropyCriterion(task, False, eps)
        assert torch.equal(loss, stock(LogitsModel(logits, dictionary), sample, reduce=False)[0])


def test_sentence_avg_uses_sentences_as_sample_size():
    task, dictionary = make_task(13)
    logits, sample = random_batch(5, 4, 13, seed=3)
    criterion = TemperedCrossEntropyCriterion(
        task, sentence_avg=True, label_smoothing=0.1, softmax_temperature=2.0
    )
    _, sample_size, log = criterion(LogitsModel(logits, dictionary), sample)
    assert sample_size == log["sample_size"] == 5


def test_loss_is_T_times_the_tempered_cross_entropy():
    task, dictionary = make_task(31)
    logits, sample = random_batch(2, 5, 31, seed=11)
    for T in (0.7, 3.0):
        scaled, _, _ = loss_and_grad(make_criterion(task, T, 0.1, 0.2), logits, sample, dictionary)
        plain, _, _ = loss_and_grad(
            make_criterion(task, T, 0.1, 0.2, rescale=False), logits, sample, dictionary
        )
        torch.testing.assert_close(scaled, T * plain)


def test_high_temperature_smooths_the_distribution():
    task, dictionary = make_task(40)
    logits, sample = random_batch(2, 5, 40, seed=2)
    _, _, cold = loss_and_grad(make_criterion(task, 1.0), logits, sample, dictionary)
    _, _, hot = loss_and_grad(make_criterion(task, 5.0), logits, sample, dictionary)
    assert hot["entropy"] > cold["entropy"]
    torch.testing.assert_close(hot["entropy_untempered"], cold["entropy"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_extreme_logits_and_temperature_stay_finite_and_are_computed_in_fp32(dtype):
    task, dictionary = make_task(50)
    logits, sample = random_batch(2, 4, 50, seed=9, scale=1.0)
    logits = (logits.sign() * 1e4).to(dtype)  # |D| = 1e4 (fp16 max is 65504)
    for T in (100.0, 0.05):
        loss, grad, log = loss_and_grad(make_criterion(task, T, 0.1, 0.5), logits, sample, dictionary)
        assert loss.dtype == torch.float32
        assert torch.isfinite(loss) and torch.isfinite(grad.float()).all()
        assert all(torch.isfinite(log[k]) for k in ("nll_loss", "entropy", "nll_loss_untempered"))


@pytest.mark.parametrize(
    "option,kwargs,message",
    [
        ("T", {"T": 0.0}, "--softmax-temperature must be a finite number > 0"),
        ("T", {"T": -2.0}, "--softmax-temperature must be a finite number > 0"),
        ("T", {"T": float("nan")}, "--softmax-temperature must be a finite number > 0"),
        ("T", {"T": float("inf")}, "--softmax-temperature must be a finite number > 0"),
        ("eps", {"eps": 1.0}, r"--label-smoothing must be in \[0, 1\)"),
        ("eps", {"eps": -0.1}, r"--label-smoothing must be in \[0, 1\)"),
        ("w", {"w": 1.5}, r"--sem-weight must be in \[0, 1\)"),
        ("w", {"w": 1.0}, r"--sem-weight must be in \[0, 1\), got 1.0 \(at 1 the loss is the entropy alone"),
        ("w", {"w": -0.5}, r"--sem-weight must be in \[0, 1\)"),
    ],
)
def test_bad_options_are_refused_when_the_criterion_is_built(option, kwargs, message):
    task, _ = make_task(10)
    with pytest.raises(ValueError, match=message):
        make_criterion(task, **kwargs)


def test_adaptive_softmax_output_layer_is_refused():
    task, dictionary = make_task(10)
    logits, sample = random_batch(1, 3, 10, seed=1)
    model = LogitsModel(logits, dictionary)
    model.decoder.adaptive_softmax = torch.nn.Identity()
    with pytest.raises(ValueError, match="needs a full softmax output layer.*adaptive"):
        make_criterion(task, 2.0)(model, sample)


def test_metrics_are_sums_so_they_reduce_correctly_across_workers():
    """Two workers' logging outputs reduce to the same metrics as one worker seeing both batches."""
    from fairseq import metrics

    task, dictionary = make_task(21)
    criterion = make_criterion(task, 3.0, 0.1, 0.1)
    (l1, s1), (l2, s2) = random_batch(2, 5, 21, seed=1), random_batch(3, 5, 21, seed=2)
    _, _, log1 = criterion(LogitsModel(l1, dictionary), s1)
    _, _, log2 = criterion(LogitsModel(l2, dictionary), s2)
    joint_sample = {
        "net_input": {},
        "ntokens": s1["ntokens"] + s2["ntokens"],
        "target": torch.cat([s1["target"], s2["target"]]),
    }
    _, _, joint = criterion(LogitsModel(torch.cat([l1, l2]), dictionary), joint_sample)

    def reduced(logs):
        with metrics.aggregate() as agg:
            TemperedCrossEntropyCriterion.reduce_metrics(logs)
        return agg.get_smoothed_values()

    two_workers, one_worker = reduced([log1, log2]), reduced([joint])
    for key in (
        "loss",
        "nll_loss",
        "ppl",
        "nll_loss_untempered",
        "ppl_untempered",
        "entropy",
        "entropy_untempered",
    ):
        assert math.isclose(two_workers[key], one_worker[key], rel_tol=1e-3), key
    assert math.isclose(
        one_worker["entropy"], float(joint["entropy"]) / joint["ntokens"] / math.log(2), rel_tol=1e-3
    )


def test_fused_tempered_log_softmax_equals_autograd_through_the_division():
    from fairseq_ctemp.criterions.tempered_ce import tempered_log_softmax

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = (torch.randn(6, 4, 37) * 5).to(dtype).requires_grad_()
        before = x.detach().clone()
        reference = F.log_softmax(x.float() / 3.5, dim=-1)
        fused = tempered_log_softmax(x, 3.5)
        assert torch.equal(x.detach(), before)  # the logits themselves are never overwritten
        assert fused.dtype == torch.float32 and torch.equal(fused, reference)
        upstream = torch.randn_like(reference)
        (expected,) = torch.autograd.grad(reference, x, upstream)
        (actual,) = torch.autograd.grad(fused, x, upstream)
        assert actual.dtype == dtype
        torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "autocast-bf16"])
def test_scaled_linear_is_the_projection_divided_by_t(bias, precision):
    """The projected path's logits / T, the scale applied by the matrix product: against the
    float64 product divided by T, within the rounding of the result (forward and gradients); under
    autocast (fairseq's --amp) from fp32 inputs, the product in bfloat16 as F.linear's would be."""
    from fairseq_ctemp.criterions.tempered_ce import scaled_linear

    torch.manual_seed(0)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "autocast-bf16": torch.float32}[precision]
    linear = torch.nn.Linear(24, 50, bias=bias).to(dtype)
    x = torch.randn(30, 24).to(dtype).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "autocast-bf16"):
        z = scaled_linear(x, linear, 1 / 3.0)
    wide = torch.nn.Linear(24, 50, bias=bias).double()
    wide.load_state_dict(linear.state_dict())
    xd = x.detach().double().requires_grad_()
    expected = wide(xd) / 3.0
    u = 2.0**-24 if precision == "fp32" else 2.0**-8  # unit roundoff
    assert z.dtype == (torch.float32 if precision == "fp32" else torch.bfloat16)
    # each input rounded once (autocast), each term and the result once: a few roundoffs of the
    # sum of the terms' sizes
    size = (xd.abs() @ wide.weight.abs().T).max().item() / 3.0 + expected.abs().max().item()
    torch.testing.assert_close(z.double(), expected, rtol=0, atol=4 * u * size)
    upstream = torch.randn(30, 50, dtype=torch.float64)
    z.backward(upstream.to(dtype))
    expected.backward(upstream)
    pairs = [(x.grad, xd.grad), (linear.weight.grad, wide.weight.grad)] + (
        [(linear.bias.grad, wide.bias.grad)] if bias else []
    )
    for got, want in pairs:
        torch.testing.assert_close(got.double(), want, rtol=0, atol=16 * u * want.abs().max().item())


def peak_tensor_bytes(run):
    """The most tensor memory run() held at once beyond what existed before it (profiler memory
    events; CPU)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    return max(itertools.accumulate(nbytes for _, nbytes in events))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tempered_loss_holds_no_more_memory_than_fairseqs(dtype):
    """A training step's loss and backward from the logits, as fairseq's label_smoothed_cross_entropy
    computes them (log_softmax(x.float())) and at T = 4: the tempered one never holds more. With
    half-precision logits it once did, by one batch x vocabulary tensor of their precision (the
    cast back of the gradient ran while the log-softmax's backward still held its tensors)."""
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    from fairseq_ctemp.criterions.tempered_ce import tempered_log_softmax

    logits = torch.randn(512, 4000).to(dtype).requires_grad_()
    target = torch.randint(0, 4000, (512,))

    def step(log_softmax):
        def run():
            lprobs = log_softmax(logits)
            loss, _ = label_smoothed_nll_loss(lprobs, target, 0.1)
            loss.backward()
            logits.grad = None

        return run

    stock = peak_tensor_bytes(step(lambda x: F.log_softmax(x.float(), dim=-1)))
    tempered = peak_tensor_bytes(step(lambda x: tempered_log_softmax(x, 4.0)))
    assert stock >= 512 * 4000 * 8  # the log-probabilities and their gradient, fp32
    assert tempered <= stock, (tempered, stock)


def test_negative_entropy_gradient():
    from fairseq_ctemp.criterions.tempered_ce import NegativeEntropy

    lp = torch.log_softmax(torch.randn(5, 7, dtype=torch.float64), -1).requires_grad_()
    assert torch.autograd.gradcheck(NegativeEntropy.apply, (lp,))


def test_training_diagnostics_are_a_scaled_estimate_and_validation_ones_exact():
    task, dictionary = make_task(30)
    logits, sample = random_batch(60, 20, 30, seed=4)  # well over 256 target positions
    assert sample["ntokens"] > 500
    criterion = make_criterion(task, 2.0, 0.1)
    _, _, estimate = criterion(LogitsModel(logits, dictionary), sample)
    criterion.eval()
    _, _, exact = criterion(LogitsModel(logits, dictionary), sample)
    reference = slow_reference(logits, sample["target"], 2.0, 0.1, 0.0)
    for key, value in zip(("entropy", "entropy_untempered", "nll_loss_untempered"), reference[2:]):
        torch.testing.assert_close(exact[key].double(), value, rtol=1e-5, atol=1e-4)
        assert abs(float(estimate[key]) / float(value) - 1) < 0.05, key


def test_training_diagnostics_are_exact_with_fewer_targets_than_sampled_positions():
    """More positions than the sample (600 > 256) but fewer non-padding targets (< 240): each is
    counted once, unscaled, so training logs the exact sums."""
    task, dictionary = make_task(30)
    logits, sample = random_batch(30, 20, 30, seed=5)
    sample["target"][:, 8:] = PAD
    sample["ntokens"] = int(sample["target"].ne(PAD).sum())
    assert logits.shape[0] * logits.shape[1] > 256 > sample["ntokens"] > 100
    criterion = make_criterion(task, 2.0, 0.1)
    _, _, logged = criterion(LogitsModel(logits, dictionary), sample)
    reference = slow_reference(logits, sample["target"], 2.0, 0.1, 0.0)
    for key, value in zip(("entropy", "entropy_untempered", "nll_loss_untempered"), reference[2:]):
        torch.testing.assert_close(logged[key].double(), value, rtol=1e-5, atol=1e-4)


def test_training_diagnostics_under_autocast_are_float32_sums():
    """fairseq's --amp: the sampled positions' diagnostics are summed in float32 as without
    autocast (a product with their weights would be a bfloat16 one, off in the third digit)."""
    task, dictionary = make_task(30)
    logits, sample = random_batch(60, 20, 30, seed=4)
    criterion = make_criterion(task, 2.0, 0.1)
    _, _, plain = criterion(LogitsModel(logits, dictionary), sample)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, _, autocast = criterion(LogitsModel(logits, dictionary), sample)
    for key in ("entropy", "entropy_untempered", "nll_loss_untempered"):
        torch.testing.assert_close(autocast[key], plain[key], rtol=1e-6, atol=0)
