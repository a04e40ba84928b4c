"""The CUDA paths (marker `cuda`; every test skips without a GPU, at no cost): tempered_ce and its
chunked loss (--loss-chunk-tokens) against their float64 CPU reference, fairseq-train --fp16 / --bf16 at T = 1, 4, 100 against an fp32 CPU run,
every temperature head and SACT in half precision against an fp32 CPU forward, and greedy decoding
on CUDA against the CPU. `make gpu-check` runs them and reports (docs/gpu.md, with the tolerances).

CTEMP_CUDA_TESTS_ON_CPU=1 runs them on the CPU instead: a dry run of the tests' own code for
machines without a GPU (bf16 and fp16 on the CPU; fairseq's fp16 trainer and the CUDA-vs-CPU
comparison still need CUDA and skip). It is never what the gpu-check report is about.
"""

import copy
import functools
import gzip
import json
import math
import os

import pytest
import torch
from conftest import (
    FAST_DECODE,
    LM_HEAD_ARCHES,
    PLUGIN_DIR,
    REPO,
    TINY_TRANSFORMER,
    TRAIN_DEFAULTS,
    hypotheses,
    json_log_records,
    run_cli,
)

ON_CPU = os.environ.get("CTEMP_CUDA_TESTS_ON_CPU") == "1"
DEVICE = "cpu" if ON_CPU else "cuda"
NO_CUDA = f"no CUDA device (torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'})"
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not ON_CPU and not torch.cuda.is_available(), reason=NO_CUDA),
]
HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}
# Unit roundoff of each dtype (half the spacing of numbers in [1, 2)).
ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def skip_unless_supported(precision):
    if precision == "bf16" and not ON_CPU and not torch.cuda.is_bf16_supported():
        pytest.skip(f"bf16 not supported by {torch.cuda.get_device_name()}")


# ---- tempered_ce: loss, gradients and logged statistics against the float64 CPU reference ----

CRITERION_CASES = [  # (T, label smoothing, SEM weight)
    (1.0, 0.1, 0.0),
    (1.0, 0.1, 0.3),
    (4.0, 0.1, 0.0),
    (4.0, 0.1, 0.3),
    (100.0, 0.1, 0.0),
    (100.0, 0.2, 0.5),
]
# Small vocabularies take CUDA's one-warp-per-row softmax kernels; 32003 takes the block kernels
# (and, being odd, their unaligned-row path), which the fused in-place log-softmax must survive.
SHAPES = [(3, 4, 17), (4, 8, 32003)]
STATS = ("nll_loss", "entropy", "entropy_untempered", "nll_loss_untempered")


def criterion_on_device(shape, T, eps, w, dtype):
    """(loss, logits gradient, logged stats) on DEVICE, and the float64 CPU reference
    (tests/test_tempered_ce.py) computed from the same logits, rounded to `dtype` first."""
    import test_tempered_ce as ref

    task, dictionary = ref.make_task(shape[-1])
    logits, sample = ref.random_batch(*shape, seed=int(T) + shape[-1])
    logits = logits.to(dtype)
    model = ref.LogitsModel(logits.clone(), dictionary).to(DEVICE)
    on_device = {**sample, "target": sample["target"].to(DEVICE)}
    loss, _, log = ref.make_criterion(task, T, eps, w)(model, on_device)
    loss.backward()

    exact = logits.double().requires_grad_()
    expected = ref.slow_reference(exact, sample["target"], T, eps, w)
    expected[0].backward()
    padding = sample["target"].eq(ref.PAD).to(DEVICE)
    # fp32 keeps ~7 digits of each token's terms, of size up to T ln V; SEM at a high T cancels most
    # of them (T * ((1 - w) * ~ln V - w * ~ln V)), so the loss gets an absolute tolerance of 1e-6 of
    # their sum.
    loss_atol = 1e-6 * T * sample["ntokens"] * math.log(shape[-1])
    return (loss, model.logits.grad, log), (expected[0], exact.grad, expected[1:]), padding, loss_atol


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"V{s[-1]}")
@pytest.mark.parametrize("T,eps,w", CRITERION_CASES)
def test_tempered_ce_fp32_equals_the_float64_reference(shape, T, eps, w):
    (loss, grad, log), (ref_loss, ref_grad, ref_stats), padding, loss_atol = criterion_on_device(
        shape, T, eps, w, torch.float32
    )
    assert loss.device.type == DEVICE and grad.dtype == torch.float32
    # fp32 arithmetic throughout: the CPU test's relative tolerances (tests/test_tempered_ce.py);
    # absolute ones from the size of the terms (loss: criterion_on_device; gradient: 2^-24, the fp32
    # rounding of probabilities <= 1).
    torch.testing.assert_close(loss.double().cpu(), ref_loss.detach(), rtol=1e-5, atol=loss_atol)
    torch.testing.assert_close(grad.double().cpu(), ref_grad, rtol=1e-4, atol=2.0**-24)
    for key, value in zip(STATS, ref_stats):
        torch.testing.assert_close(log[key].double().cpu(), value.detach(), rtol=1e-5, atol=1e-5)
    assert grad[padding].abs().max() == 0  # padding: no gradient


@pytest.mark.parametrize("precision", sorted(HALF))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"V{s[-1]}")
@pytest.mark.parametrize("T,eps,w", CRITERION_CASES)
def test_tempered_ce_half_precision_logits_are_computed_in_fp32(shape, T, eps, w, precision):
    """Half-precision logits (as --fp16 / --bf16 models return them) are converted to fp32 before
    the division by T: the loss and statistics must equal the float64 reference of the same (rounded)
    logits to fp32 accuracy, as above. The gradient is returned in the logits' dtype, so it may differ
    from the reference by that rounding: 2 unit roundoffs relative (fp16 2^-10, bf16 2^-7), and 2^-24
    absolute (the step of fp16's subnormals, which gradients of 1/V at V = 32003 are; also the fp32
    rounding of the gradient's terms)."""
    skip_unless_supported(precision)
    dtype = HALF[precision]
    (loss, grad, log), (ref_loss, ref_grad, ref_stats), padding, loss_atol = criterion_on_device(
        shape, T, eps, w, dtype
    )
    assert loss.dtype == torch.float32 and grad.dtype == dtype
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    torch.testing.assert_close(loss.double().cpu(), ref_loss.detach(), rtol=1e-5, atol=loss_atol)
    torch.testing.assert_close(grad.double().cpu(), ref_grad, rtol=2 * ROUNDOFF[dtype], atol=2.0**-24)
    for key, value in zip(STATS, ref_stats):
        torch.testing.assert_close(log[key].double().cpu(), value.detach(), rtol=1e-5, atol=1e-5)
    assert grad[padding].abs().max() == 0


# ---- tempered_ce --loss-chunk-tokens: the chunked loss on the device against float64 ----


def chunked_on_device(vocab, T, eps, w, dtype, autocast=None):
    """The chunked loss of random features and projection (rounded to dtype) on DEVICE, under
    torch.autocast to the dtype `autocast` if given: (loss, nll, the logits / T as the device's
    product makes them (1/T as its alpha), the inputs with their gradients), and the inputs on the
    CPU."""
    from fairseq_ctemp.criterions.chunked_loss import chunked_tempered_loss

    g = torch.Generator().manual_seed(vocab)
    n, d = 24, 16
    h, weight = torch.randn(n, d, generator=g).to(dtype), (0.3 * torch.randn(vocab, d, generator=g)).to(dtype)
    target, keep = torch.randint(0, vocab, (n,), generator=g), torch.rand(n, generator=g) > 0.2
    inputs = [x.to(DEVICE).requires_grad_() for x in (h, weight)]
    with torch.autocast(DEVICE, dtype=autocast or torch.float16, enabled=autocast is not None):
        loss, sums = chunked_tempered_loss(
            *inputs, None, target.to(DEVICE), keep.to(DEVICE), T, eps, w, True, chunk=5
        )  # fmt: skip
    loss.backward()
    scaled = torch.addmm(inputs[0].new_zeros(()), inputs[0], inputs[1].T, beta=0, alpha=1 / T)
    return (loss, sums.nll, scaled.detach().double().cpu(), inputs), (h, weight, target, keep)


@pytest.mark.parametrize("vocab", [17, 32003])
@pytest.mark.parametrize("T,eps,w", CRITERION_CASES)
def test_chunked_loss_fp32_equals_the_float64_reference(vocab, T, eps, w):
    from test_chunked_loss import reference

    (loss, nll, _, inputs), (h, weight, target, keep) = chunked_on_device(vocab, T, eps, w, torch.float32)
    ref_loss, ref_nll, ref_grads = reference(h, weight, None, target, keep, T, eps, w, True)
    atol = 1e-6 * T * len(target) * math.log(vocab)  # as criterion_on_device's
    torch.testing.assert_close(loss.double().cpu(), ref_loss, rtol=1e-5, atol=atol)
    torch.testing.assert_close(nll.double().cpu(), ref_nll, rtol=1e-5, atol=atol)
    for x, expected in zip(inputs, ref_grads):
        assert x.grad.dtype == torch.float32
        torch.testing.assert_close(x.grad.double().cpu(), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("precision", sorted(HALF))
@pytest.mark.parametrize("T,eps,w", CRITERION_CASES)
def test_chunked_loss_in_half_precision(precision, T, eps, w):
    """Half-precision features and projection (--fp16 / --bf16): the logits / T are made in that
    dtype by the product, as tempered_ce's projected path makes them, and normalised in fp32, so
    the loss equals the float64 reference of those logits to fp32 accuracy; the gradients, made in
    half precision (on CUDA in fp16 by log-softmax's backward kernel), are within a few unit
    roundoffs of the float64 gradients (relative to their largest entry)."""
    skip_unless_supported(precision)
    from test_chunked_loss import reference

    dtype, vocab = HALF[precision], 32003
    (loss, nll, scaled, inputs), (h, weight, target, keep) = chunked_on_device(vocab, T, eps, w, dtype)
    lprobs = torch.log_softmax(scaled, -1)[keep]
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    smoothed, ref_nll = label_smoothed_nll_loss(lprobs, target[keep], eps, reduce=True)
    ref_loss = ((1 - w) * smoothed + w * (lprobs.exp() * lprobs).sum()) * T
    atol = 1e-6 * T * len(target) * math.log(vocab)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    torch.testing.assert_close(loss.double().cpu(), ref_loss, rtol=1e-5, atol=atol)
    torch.testing.assert_close(nll.double().cpu(), ref_nll, rtol=1e-5, atol=atol)
    for x, expected in zip(inputs, reference(h, weight, None, target, keep, T, eps, w, True)[2]):
        assert x.grad.dtype == dtype and torch.isfinite(x.grad).all()
        scale = expected.abs().max().item()
        torch.testing.assert_close(x.grad.double().cpu(), expected, rtol=0, atol=8 * ROUNDOFF[dtype] * scale)


@pytest.mark.parametrize("precision", sorted(HALF))
@pytest.mark.parametrize("T,eps,w", CRITERION_CASES)
def test_chunked_loss_under_autocast(precision, T, eps, w):
    """fairseq's --amp: float32 features and projection, the products autocast to half precision,
    the rest in fp32: the loss within a few half-precision roundoffs of the float64 reference, the
    gradients float32 and within a few roundoffs of it (relative to their largest entry)."""
    skip_unless_supported(precision)
    from test_chunked_loss import reference

    dtype, vocab = HALF[precision], 32003
    (loss, nll, _, inputs), (h, weight, target, keep) = chunked_on_device(
        vocab, T, eps, w, torch.float32, dtype
    )
    ref_loss, ref_nll, ref_grads = reference(h, weight, None, target, keep, T, eps, w, True)
    # a token's loss moves by about |dloss/d(z/T)| * T * roundoff * |z| / T <= 2 roundoff |z| when
    # its logits z are rounded to half precision (at T = 100 with SEM the terms nearly cancel)
    u, z_max = ROUNDOFF[dtype], (h @ weight.T).abs().max().item()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    for got, expected in ((loss, ref_loss), (nll, ref_nll)):
        torch.testing.assert_close(got.double().cpu(), expected, rtol=8 * u, atol=4 * u * z_max * len(target))
    for x, expected in zip(inputs, ref_grads):
        assert x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()
        scale = expected.abs().max().item()
        torch.testing.assert_close(x.grad.double().cpu(), expected, rtol=0, atol=8 * ROUNDOFF[dtype] * scale)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("arch", ["transformer-softmax-ct", "transformer-mos-ct-lambda"])
def test_chunked_ct_loss_on_cuda_equals_the_float64_reference(toy_data, arch, eps):
    """ct_cross_entropy --loss-chunk-tokens with the model on the GPU (fp32): loss, NLL and the
    gradients of the features and of the head's parameters against the float64 reference on the
    CPU (tests/test_chunked_head_loss.py), within the CPU test's tolerances."""
    from fairseq import utils
    from test_chunked_head_loss import batch, chunked_and_reference, lm

    task, model, criterion = lm(
        toy_data, LM_HEAD_ARCHES[arch], "--loss-chunk-tokens", "40", "--label-smoothing", str(eps)
    )
    sample = utils.apply_to_sample(lambda t: t.to(DEVICE), batch(task))
    (loss, nll, grads), (ref_loss, ref_nll, ref_grads) = chunked_and_reference(
        model.to(DEVICE), criterion, sample, eps
    )
    assert loss == pytest.approx(ref_loss, rel=1e-5, abs=ref_loss * 1e-6 + 1e-6)
    assert nll == pytest.approx(ref_nll, rel=1e-5)
    assert grads.keys() == ref_grads.keys()
    for name, ref in ref_grads.items():
        torch.testing.assert_close(
            grads[name], ref, rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}"
        )


# ---- fairseq-train --fp16 / --bf16 with tempered_ce, against the same run in fp32 on the CPU ----

UPDATES = 200
# fairseq's fp16 loss scale starts at 128 and halves at each overflow (the update is skipped); it
# only grows after 2**14 clean updates, so in 200 updates it can only fall. Above 1 means at most 7
# overflows; a collapsing scale (overflow at every step) falls below it within 7 updates, and
# fairseq stops at 1e-4 ("Minimum loss scale reached").
LOSS_SCALE_FLOOR = 1.0
# The loss must fall as in fp32: by at least 3/4 of the fp32 run's fall, and end within 1/4 of that
# fall of the fp32 run's loss (measured on the CPU in bf16: within 3% of the fall at T = 1, 4, 100).
PROGRESS_TOLERANCE = 0.25


def train_tempered(data, save_dir, T, *extra, updates=UPDATES):
    """`updates` updates of the tiny transformer with tempered_ce (dropout 0: the runs compared differ
    only in precision and device), logged every 10 updates, checkpoint saved at the end only."""
    train_defaults = [a for a in TRAIN_DEFAULTS if a != "--cpu"]
    proc = run_cli(
        "fairseq-train",
        data,
        "--user-dir",
        PLUGIN_DIR,
        *TINY_TRANSFORMER,
        *train_defaults,
        "--dropout",
        "0",
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        T,
        "--label-smoothing",
        "0.1",
        "--max-update",
        updates,
        "--log-interval",
        "10",
        "--disable-validation",
        "--save-interval",
        "1000",
        "--no-epoch-checkpoints",
        "--save-dir",
        save_dir,
        *extra,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    records = json_log_records(proc.stdout, "train_inner")
    assert int(records[-1]["num_updates"]) == updates
    return records, proc.stdout


@pytest.fixture(scope="module")
def fp32_cpu_runs(toy_data, tmp_path_factory):
    """The reference: each temperature's run in fp32 on the CPU (its logged records), trained once."""
    runs = {}

    def run(T):
        if T not in runs:
            runs[T], _ = train_tempered(toy_data["bin"], tmp_path_factory.mktemp(f"fp32-T{T:g}"), T, "--cpu")
        return runs[T]

    return run


@pytest.mark.parametrize("T", [1.0, 4.0, 100.0])
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_fairseq_train_in_half_precision_trains_like_fp32(toy_data, fp32_cpu_runs, tmp_path, precision, T):
    skip_unless_supported(precision)
    if ON_CPU and precision == "fp16":
        pytest.skip("fairseq's fp16 trainer needs CUDA (trainer.py calls .cuda() after an overflow)")
    extra = ["--cpu"] if ON_CPU else []
    records, log = train_tempered(toy_data["bin"], tmp_path, T, f"--{precision}", "--no-save", *extra)
    assert "Minimum loss scale reached" not in log
    losses = [float(r["loss"]) for r in records]
    assert all(math.isfinite(x) for x in losses), losses
    if precision == "fp16":
        scales = [float(r["loss_scale"]) for r in records]
        assert min(scales) >= LOSS_SCALE_FLOOR, (scales, log.count("gradient overflow detected"))
    reference = [float(r["loss"]) for r in fp32_cpu_runs(T)]
    fall = reference[0] - reference[-1]
    assert fall > 0
    assert losses[0] - losses[-1] >= (1 - PROGRESS_TOLERANCE) * fall, (losses, reference)
    assert abs(losses[-1] - reference[-1]) <= PROGRESS_TOLERANCE * fall, (losses, reference)


# ---- every temperature head and SACT in half precision ----

# Translation models: SACT's three attention temperatures, and the transformer translators with
# contextual temperature and with SACT once their architectures are registered.
TRANSLATION_ARCHES = {
    "sact_lstm-sact": ["--arch", "sact_lstm_tiny", "--attention-temperature", "sact"],
    "sact_lstm-sact_released": ["--arch", "sact_lstm_tiny", "--attention-temperature", "sact_released"],
    "sact_lstm-fixed": [
        "--arch",
        "sact_lstm_tiny",
        "--attention-temperature",
        "fixed",
        "--fixed-attention-temperature",
        "0.5",
    ],
    "ct_transformer": ["--arch", "ct_transformer_tiny"],
    "sact_transformer": ["--arch", "sact_transformer_tiny"],
}
MODELS = {**{f"lm:{k}": v for k, v in LM_HEAD_ARCHES.items()}, **TRANSLATION_ARCHES}
# Tolerance on log-probabilities of the half-precision model against the fp32 CPU forward of the
# same (rounded) weights, in unit roundoffs of the dtype: each activation is rounded ~10-20 times on
# its way through these 1-2 layer models (32 absolute), and a log-probability carries the relative
# error of logits of its own size (8 relative; adaptive softmax tails reach -35). Measured on the
# CPU: at most 30 roundoffs, at a log-probability of -35 (tolerance 312 there).
HALF_LOGPROB_ATOL, HALF_LOGPROB_RTOL = 32, 8


def build_model(data, name):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.models import ARCH_MODEL_REGISTRY

    import fairseq_ctemp  # noqa: F401  (registers the architectures)

    arch = MODELS[name][MODELS[name].index("--arch") + 1]
    if arch not in ARCH_MODEL_REGISTRY:
        pytest.skip(f"architecture not registered: {arch}")
    lm = name.startswith("lm:")
    task_args = (
        ["--task", "language_modeling", "--tokens-per-sample", "32"] if lm else ["-s", "src", "-t", "tgt"]
    )
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser, [str(data), "--user-dir", PLUGIN_DIR, *task_args, "--dropout", "0", *MODELS[name]]
    )
    # Every dropout off (the architectures' own defaults too: locked, embedding, weight, attention),
    # so that training mode, which the gradients need (cuDNN's RNN backward refuses eval mode),
    # computes the same function as eval mode; test_model_in_half_precision checks that it does.
    for key, value in vars(args).items():
        if "dropout" in key and isinstance(value, float):
            setattr(args, key, 0.0)
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(1)
    return task, task.build_model(cfg.model).eval()


def model_inputs(task, lm, device):
    """(net_input for the full forward, the decoder's input tokens, targets): an LM block of 3 x 9
    tokens, or 3 left-padded source sentences (lengths 7, 5, 2) and 6-token target prefixes."""
    g = torch.Generator().manual_seed(0)
    d = task.target_dictionary
    if lm:
        tokens = torch.randint(d.nspecial, len(d), (3, 9), generator=g)
        net_input = {"src_tokens": tokens.to(device)}
        return net_input, tokens.to(device), tokens.roll(-1, 1).to(device)
    src = torch.full((3, 7), d.pad())
    for b, n in enumerate((7, 5, 2)):
        src[b, 7 - n :] = torch.randint(d.nspecial, len(d), (n,), generator=g)
        src[b, -1] = d.eos()
    prev = torch.randint(d.nspecial, len(d), (3, 6), generator=g)
    prev[:, 0] = d.eos()
    net_input = {
        "src_tokens": src.to(device),
        "src_lengths": torch.tensor([7, 5, 2]).to(device),
        "prev_output_tokens": prev.to(device),
    }
    return net_input, prev.to(device), prev.roll(-1, 1).to(device)


def full_and_incremental(model, net_input, prev, lm):
    """Log-probabilities of every position from one forward pass and from step-by-step decoding."""
    full = model.get_normalized_probs(model(**net_input), log_probs=True)
    encoder_out = None if lm else model.encoder(net_input["src_tokens"], src_lengths=net_input["src_lengths"])
    state, steps = {}, []
    for t in range(prev.size(1)):
        kwargs = {} if lm else {"encoder_out": encoder_out}
        out = model.decoder(prev[:, : t + 1], incremental_state=state, **kwargs)
        steps.append(model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True))
    return full, torch.cat(steps, 1)


@pytest.mark.parametrize("precision", sorted(HALF))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_in_half_precision(toy_data, name, precision):
    """Normalised, finite log-probabilities and gradients; the full forward and step-by-step decoding
    both within HALF_LOGPROB_ATOL / _RTOL of the fp32 CPU forward; gradients in the direction of fp32's."""
    skip_unless_supported(precision)
    dtype, lm = HALF[precision], name.startswith("lm:")
    task, model = build_model(toy_data["lm_bin" if lm else "bin"], name)
    model = model.to(DEVICE, dtype)
    reference = copy.deepcopy(model).to("cpu", torch.float32)  # the same rounded weights, in fp32
    net_input, prev, target = model_inputs(task, lm, DEVICE)

    with torch.no_grad():
        full, incremental = full_and_incremental(model, net_input, prev, lm)
        cpu_input = {k: v.cpu() for k, v in net_input.items()}
        expected, _ = full_and_incremental(reference, cpu_input, prev.cpu(), lm)
    assert full.dtype == torch.float32 and full.shape[-1] == len(task.target_dictionary)
    assert torch.isfinite(full).all() and torch.isfinite(incremental).all()
    ones = torch.ones(full.shape[:-1], device=full.device)
    torch.testing.assert_close(full.exp().sum(-1), ones, atol=1e-3, rtol=0)
    tolerance = dict(atol=HALF_LOGPROB_ATOL * ROUNDOFF[dtype], rtol=HALF_LOGPROB_RTOL * ROUNDOFF[dtype])
    torch.testing.assert_close(full.cpu(), expected, **tolerance)
    torch.testing.assert_close(incremental.cpu(), expected, **tolerance)
    torch.testing.assert_close(incremental, full, **tolerance)  # incremental = full, in half precision

    grads = {}
    for key, m, inputs, y in (
        ("half", model, net_input, target),
        ("fp32", reference, cpu_input, target.cpu()),
    ):
        m.train()  # as in fairseq-train; cuDNN's RNN backward refuses eval mode
        lp = m.get_normalized_probs(m(**inputs), log_probs=True)
        if key == "fp32":  # no dropout left: training mode computes what eval mode did
            torch.testing.assert_close(lp.detach(), expected, atol=1e-6, rtol=0)
        (-lp.gather(-1, y[..., None]).mean()).backward()
        grads[key] = [(n, p.grad) for n, p in m.named_parameters() if p.requires_grad and p.grad is not None]
    assert [n for n, _ in grads["half"]] == [n for n, _ in grads["fp32"]]
    for n, g in grads["half"]:
        assert g.dtype == dtype and torch.isfinite(g).all(), n
    half = torch.cat([g.float().flatten().cpu() for _, g in grads["half"]])
    fp32 = torch.cat([g.flatten() for _, g in grads["fp32"]])
    assert half.abs().max() > 0
    assert torch.nn.functional.cosine_similarity(half, fp32, dim=0) > 0.99


@functools.cache
def cpu_lstm_runs_under_autocast(dtype):
    """Whether torch's LSTM over unpacked sequences (as the LSTM LMs run it; sact_lstm's packed
    encoder and LSTM cells take other kernels) runs under CPU autocast to dtype here: oneDNN has it
    in bf16 on some CPUs only (a dry run's limit, not the model's)."""
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
            torch.nn.LSTM(4, 4)(torch.zeros(2, 1, 4))
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize("precision", sorted(HALF))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_under_autocast(toy_data, name, precision):
    """fairseq's --amp: fp32 weights, the forward under torch.autocast to half precision. As in
    half precision: normalised, finite fp32 log-probabilities, the full forward and step-by-step
    decoding within HALF_LOGPROB_ATOL / _RTOL of the fp32 CPU forward; fp32 gradients in the
    direction of fp32's."""
    skip_unless_supported(precision)
    if ON_CPU and "lstm" in name and precision == "fp16":
        pytest.skip("the CPU's oneDNN LSTM has no fp16 kernel")
    if ON_CPU and name.startswith("lm:lstm") and not cpu_lstm_runs_under_autocast(HALF[precision]):
        pytest.skip(f"this CPU's oneDNN has no LSTM kernel under {precision} autocast")
    dtype, lm = HALF[precision], name.startswith("lm:")
    task, model = build_model(toy_data["lm_bin" if lm else "bin"], name)
    model = model.to(DEVICE)
    reference = copy.deepcopy(model).to("cpu")
    net_input, prev, target = model_inputs(task, lm, DEVICE)
    cpu_input = {k: v.cpu() for k, v in net_input.items()}
    with torch.no_grad():
        expected, _ = full_and_incremental(reference, cpu_input, prev.cpu(), lm)
        with torch.autocast(DEVICE, dtype=dtype):
            full, incremental = full_and_incremental(model, net_input, prev, lm)
    assert full.dtype == torch.float32 and torch.isfinite(full).all() and torch.isfinite(incremental).all()
    ones = torch.ones(full.shape[:-1], device=full.device)
    torch.testing.assert_close(full.exp().sum(-1), ones, atol=1e-3, rtol=0)
    tolerance = dict(atol=HALF_LOGPROB_ATOL * ROUNDOFF[dtype], rtol=HALF_LOGPROB_RTOL * ROUNDOFF[dtype])
    torch.testing.assert_close(full.cpu(), expected, **tolerance)
    torch.testing.assert_close(incremental.cpu(), expected, **tolerance)

    grads = {}
    for key, m, inputs, y in (
        ("amp", model, net_input, target),
        ("fp32", reference, cpu_input, target.cpu()),
    ):
        m.train()
        with torch.autocast(DEVICE, dtype=dtype, enabled=key == "amp"):
            lp = m.get_normalized_probs(m(**inputs), log_probs=True)
        (-lp.gather(-1, y[..., None]).mean()).backward()
        grads[key] = [(n, p.grad) for n, p in m.named_parameters() if p.requires_grad and p.grad is not None]
    assert [n for n, _ in grads["amp"]] == [n for n, _ in grads["fp32"]]
    for n, g in grads["amp"]:
        assert g.dtype == torch.float32 and torch.isfinite(g).all(), n
    amp = torch.cat([g.flatten().cpu() for _, g in grads["amp"]])
    fp32 = torch.cat([g.flatten() for _, g in grads["fp32"]])
    assert amp.abs().max() > 0
    assert torch.nn.functional.cosine_similarity(amp, fp32, dim=0) > 0.99


# ---- greedy decoding on CUDA = on the CPU, at the training temperature ----


def test_greedy_decoding_on_cuda_equals_the_cpu(toy_data, tmp_path):
    """A tempered_ce checkpoint (T = 4; 800 fp32 updates on CUDA, enough for a different hypothesis
    for nearly every test sentence) decoded greedily by fairseq-generate at its training temperature:
    the same hypotheses on both devices, scores within 1e-4 (fp32 on both: ~1e-6 apart)."""
    if ON_CPU:
        pytest.skip("compares CUDA with the CPU")
    train_tempered(toy_data["bin"], tmp_path, 4.0, updates=800)
    checkpoint = tmp_path / "checkpoint_last.pt"
    outputs = {}
    for device in ("cpu", "cuda"):
        decode = FAST_DECODE if device == "cpu" else [a for a in FAST_DECODE if a != "--cpu"]
        proc = run_cli(
            "fairseq-generate",
            toy_data["bin"],
            "--path",
            checkpoint,
            "--user-dir",
            PLUGIN_DIR,
            *decode,
            "--beam",
            "1",
            "--gen-subset",
            "test",
        )
        assert "decoding at training temperature T=4" in proc.stdout
        outputs[device] = hypotheses(proc.stdout)
    cpu, cuda = outputs["cpu"], outputs["cuda"]
    assert len(cpu) == 80 and set(cuda) == set(cpu)
    assert len({text for _, text in cpu.values()}) > 60  # a model that tells sentences apart
    for i in cpu:
        assert cuda[i][1] == cpu[i][1], i
        assert abs(cuda[i][0] - cpu[i][0]) < 1e-4, i


# ---- the benchmarks' CUDA memory: one step's peak, with its activations ----


def test_benchmark_step_memory_holds_the_batchs_logits(monkeypatch, tmp_path):
    """bench_tempered_ce's CUDA step memory (the peak of one train_step above the resting tensors)
    includes the step's activations: stock's exceeds the fp16 logits of 2,000 target tokens at
    V = 32,000 (a batch of up to 4,096 tokens has more), and the chunked loss's is below stock's.
    fairseq's train_step resets CUDA's peak statistics after each step; measured through it, both
    step memories were the size of the fp16 gradients alone."""
    if ON_CPU:
        pytest.skip("the CPU path measures memory from profiler events, not CUDA's statistics")
    import logging

    monkeypatch.syspath_prepend(os.path.join(REPO, "benchmarks"))
    import bench_tempered_ce

    size = ["--layers", "1", "--dim", "256", "--ffn", "1024", "--heads", "4", "--max-tokens", "4096"]
    threads = torch.get_num_threads()
    try:
        result = bench_tempered_ce.main(
            ["--device", "cuda", "--vocab", "32000", *size, "--rounds", "1", "--warmup", "0"]
            + ["--batches", "1", "--loss-chunk-tokens", "1024", "--trace", str(tmp_path / "traces")]
        )
    finally:  # main() sets these process-wide
        torch.set_num_threads(threads)
        logging.disable(logging.NOTSET)
    stock, chunked = (result["models"][name]["step_mib"] for name in ("stock", "tempered"))
    assert stock > 2000 * 32000 * 2 / 2**20, result["models"]
    assert chunked < 0.8 * stock, result["models"]
    for name, t in result["traces"].items():  # --trace on CUDA: the kernels' time within the step's
        assert 0 < t["device_ms"] <= 1.05 * t["step_ms"], (name, t)
        assert "Self CUDA" in (tmp_path / "traces" / f"{name}.txt").read_text()
        # each kernel and copy counted once, as the Chrome trace has them (fairseq's "forward" and
        # "optimizer" ranges on the device's timeline once counted as well: "kernels 103 %")
        with gzip.open(tmp_path / "traces" / f"{name}.trace.json.gz", "rt") as f:
            events = json.load(f)["traceEvents"]
        on_device = sum(e["dur"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
        assert abs(t["device_ms"] - on_device / 1e3) <= 0.02 * t["device_ms"], (name, t, on_device)
