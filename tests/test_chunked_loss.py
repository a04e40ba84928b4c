"""tempered_ce --loss-chunk-tokens: the chunked output projection and loss against a float64
reference built from the definition (fairseq's label_smoothed_nll_loss of log_softmax(z / T), the
entropy term, autograd), and the criterion with it against fairseq's path through the whole model."""

import contextlib

import pytest
import torch
from conftest import PLUGIN_DIR, TINY_DIMS
from fairseq import options, tasks
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_ctemp.criterions import chunked_loss
from fairseq_ctemp.criterions.chunked_loss import chunked_tempered_loss


def reference(h, weight, bias, target, keep, temperature, eps, sem_weight, rescale):
    """(loss, nll, grads of h, W, b) in float64 from the definition."""
    h, weight = (x.detach().double().requires_grad_() for x in (h, weight))
    bias = None if bias is None else bias.detach().double().requires_grad_()
    z = h @ weight.T + (0 if bias is None else bias)
    lprobs = torch.log_softmax(z / temperature, -1)[keep]
    smoothed, nll = label_smoothed_nll_loss(lprobs, target[keep], eps, reduce=True)
    negative_entropy = (lprobs.exp() * lprobs).sum()
    loss = ((1 - sem_weight) * smoothed + sem_weight * negative_entropy) * (temperature if rescale else 1)
    inputs = [x for x in (h, weight, bias) if x is not None]
    return loss.detach(), nll.detach(), torch.autograd.grad(loss, inputs)


SETTINGS = [  # (T, eps, sem weight, rescale)
    (1.0, 0.0, 0.0, True),
    (4.0, 0.1, 0.0, True),
    (2.0, 0.1, 0.3, True),
    (0.5, 0.2, 0.5, False),
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(
    "settings", SETTINGS, ids=[f"T{s[0]}-ls{s[1]}-sem{s[2]}-rescale{s[3]}" for s in SETTINGS]
)
@pytest.mark.parametrize("chunk, with_bias", [(7, True), (1, False), (1000, True)])
@pytest.mark.parametrize("fused", [False, True], ids=["formula", "fused"])
def test_chunked_loss_against_the_float64_reference(dtype, settings, chunk, with_bias, fused, monkeypatch):
    """fused: the gradient made by log-softmax's backward kernel (what CUDA runs for float16
    logits without the entropy term), here taken in the CPU's float32 and float64."""
    if fused:
        monkeypatch.setattr(chunked_loss, "_fused_gradient", lambda a, wide, sem_weight: sem_weight == 0)
    g = torch.Generator().manual_seed(0)
    n, d, vocab = 37, 8, 50
    h = torch.randn(n, d, generator=g, dtype=dtype, requires_grad=True)
    weight = torch.randn(vocab, d, generator=g, dtype=dtype, requires_grad=True)
    bias = torch.randn(vocab, generator=g, dtype=dtype, requires_grad=True) if with_bias else None
    target = torch.randint(0, vocab, (n,), generator=g)
    keep = torch.rand(n, generator=g) > 0.2  # the rest are padding: no loss, no gradient
    loss, sums = chunked_tempered_loss(h, weight, bias, target, keep, *settings, chunk=chunk)
    (3.0 * loss).backward()  # an incoming gradient other than 1 (fairseq's fp16 loss scale)
    expected_loss, expected_nll, expected_grads = reference(h, weight, bias, target, keep, *settings)
    tolerance = dict(rtol=1e-9, atol=1e-9) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loss.double(), expected_loss, **tolerance)
    torch.testing.assert_close(sums.nll.double(), expected_nll, **tolerance)
    got = [x.grad for x in (h, weight, bias) if x is not None]
    for grad, expected in zip(got, expected_grads):
        assert grad.dtype == dtype
        torch.testing.assert_close(grad.double(), 3.0 * expected, **tolerance)
    assert not h.grad[~keep].any()
    z = (h @ weight.T + (0 if bias is None else bias)).detach()
    assert sums.correct == (z.argmax(-1) == target)[keep].sum()


@pytest.mark.parametrize(
    "settings", [(4.0, 0.1, 0.0, True), (100.0, 0.2, 0.5, True)], ids=["T4", "T100-sem0.5"]
)
def test_chunked_loss_under_autocast_against_the_float64_reference(settings):
    """fairseq's --amp: float32 features and weight, the products autocast to bfloat16 (here on
    the CPU), the loss (its entropy term included) float32: within bfloat16's rounding of the
    logits of the reference (at T = 100 with SEM the terms nearly cancel: a half-precision sum of
    the entropy would be off by far more)."""
    g = torch.Generator().manual_seed(0)
    n, d, vocab = 37, 8, 50
    h = torch.randn(n, d, generator=g, requires_grad=True)
    weight = torch.randn(vocab, d, generator=g, requires_grad=True)
    target = torch.randint(0, vocab, (n,), generator=g)
    keep = torch.rand(n, generator=g) > 0.2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, sums = chunked_tempered_loss(h, weight, None, target, keep, *settings, chunk=7)
    loss.backward()
    expected_loss, expected_nll, expected_grads = reference(h, weight, None, target, keep, *settings)
    u, z_max = 2.0**-8, (h @ weight.T).abs().max().item()  # bfloat16's unit roundoff
    for got, expected in ((loss, expected_loss), (sums.nll, expected_nll)):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), expected, rtol=8 * u, atol=4 * u * z_max * int(keep.sum()))
    for grad, expected in zip((h.grad, weight.grad), expected_grads):
        assert grad.dtype == torch.float32
        torch.testing.assert_close(grad.double(), expected, rtol=0, atol=8 * u * expected.abs().max().item())


def tiny_transformer(toy_data, *criterion_options):
    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [
            *(str(toy_data["bin"]), "--user-dir", PLUGIN_DIR, "--cpu", "--arch", "transformer", *TINY_DIMS),
            *("--criterion", "tempered_ce", "--softmax-temperature", "3", "--label-smoothing", "0.1"),
            *("--sem-weight", "0.2", "--report-accuracy", "--dropout", "0", *criterion_options),
        ],
    )
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("valid")
    torch.manual_seed(1)
    return task, task.build_model(cfg.model), task.build_criterion(cfg.criterion)


@pytest.mark.parametrize("prefix", [0, 1])
def test_the_criterion_with_chunks_against_fairseqs_path(toy_data, monkeypatch, prefix):
    """The same model and batch: fairseq's path (the model's logits, tempered_log_softmax,
    label_smoothed_nll_loss), the projected path (the logits / T made by the criterion's own
    product with the output projection: tempered_ce's default for fairseq's transformers) and
    --loss-chunk-tokens give the same loss, logs and gradient of every parameter (tied embeddings:
    the output projection's gradient reaches the embedding through the product and the chunks),
    also with fairseq's --ignore-prefix-size."""
    from fairseq_ctemp.criterions import tempered_ce

    options = ("--ignore-prefix-size", str(prefix))
    task, model, projected_criterion = tiny_transformer(toy_data, *options)
    logits_criterion = tiny_transformer(toy_data, *options)[2]
    chunked = tiny_transformer(toy_data, "--loss-chunk-tokens", "16", *options)[2]
    batch = next(iter(task.get_batch_iterator(task.dataset("valid"), max_tokens=400).next_epoch_itr()))
    results, projected = {}, []  # rows of each call of the output projection module
    linear, forward = model.decoder.output_projection, torch.nn.Linear.forward

    def counted(self, x):  # on the class: a forward of the layer's own would change the path
        if self is linear:
            projected.append(x[..., 0].numel())
        return forward(self, x)

    monkeypatch.setattr(torch.nn.Linear, "forward", counted)
    paths = (("logits", logits_criterion), ("projected", projected_criterion), ("chunked", chunked))
    for name, criterion in paths:
        with monkeypatch.context() as patch:
            if name == "logits":  # what a decoder of another output layer gets
                patch.setattr(tempered_ce, "plain_output_projection", lambda model: None)
            model.zero_grad()
            criterion.train()
            projected.clear()
            loss, sample_size, log = criterion(model, batch)
        positions = batch["target"].numel()
        # the model's output layer projects every position at once; the projected path never
        # calls it, the chunks only for the diagnostics (at most 256 sampled positions)
        expected = {"logits": [positions], "projected": []}.get(name)
        assert projected == expected if expected is not None else max(projected) <= 256 < positions
        loss.backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        results[name] = (loss.detach(), sample_size, log, grads)
    loss_p, size_p, log_p, grads_p = results["logits"]
    for name in ("projected", "chunked"):
        loss_c, size_c, log_c, grads_c = results[name]
        torch.testing.assert_close(loss_c, loss_p, rtol=1e-5, atol=1e-4)
        assert size_c == size_p and grads_c.keys() == grads_p.keys()
        for key in ("nll_loss", "entropy", "entropy_untempered", "nll_loss_untempered", "n_correct", "total"):
            got, want = (torch.as_tensor(log[key]).double() for log in (log_c, log_p))
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4, msg=(name, key))
        for key, grad in grads_p.items():  # fp32 sums in other orders: relative to the largest entry
            atol = max(1e-6, 1e-5 * grad.abs().max().item())
            torch.testing.assert_close(grads_c[key], grad, rtol=1e-4, atol=atol, msg=(name, key))


def test_a_model_without_one_output_projection_is_refused_when_the_criterion_is_built(toy_data):
    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [
            str(toy_data["bin"]),
            "--user-dir",
            PLUGIN_DIR,
            "--cpu",
            "--arch",
            "lstm",
            "--criterion",
            "tempered_ce",
        ]
        + ["--loss-chunk-tokens", "16"],
    )
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    with pytest.raises(
        ValueError, match="--loss-chunk-tokens needs a decoder whose output layer is one linear"
    ):
        task.build_criterion(cfg.criterion)


def doubled_by_a_hook(projection):
    projection.register_forward_hook(lambda module, inputs, output: 2 * output)
    return contextlib.nullcontext()


def doubled_by_a_forward_of_its_own(projection):
    projection.forward = lambda x, linear=projection.forward: 2 * linear(x)
    return contextlib.nullcontext()


@contextlib.contextmanager
def doubled_by_a_global_hook(projection):
    double = lambda module, inputs, output: 2 * output if module is projection else output  # noqa: E731
    handle = torch.nn.modules.module.register_module_forward_hook(double)
    try:
        yield
    finally:
        handle.remove()


@pytest.mark.parametrize("after_a_step", [False, True])
@pytest.mark.parametrize(
    "doubled", [doubled_by_a_hook, doubled_by_a_forward_of_its_own, doubled_by_a_global_hook]
)
def test_an_output_projection_that_runs_more_is_called_as_a_module(
    toy_data, monkeypatch, doubled, after_a_step
):
    """Quant noise, weight norm and other hooks, or a forward of the layer's own, run when the
    output projection is called: a product with its weight alone would silently skip them. Then
    tempered_ce's default path calls the model's own output layer (its loss: the division path's,
    the extra included), and --loss-chunk-tokens, which cannot, refuses in one line before any
    update; also when the extra is added after the criterion's first steps."""
    from fairseq_ctemp.criterions import tempered_ce

    task, model, criterion = tiny_transformer(toy_data)
    batch = next(iter(task.get_batch_iterator(task.dataset("valid"), max_tokens=400).next_epoch_itr()))
    chunked = tiny_transformer(toy_data, "--loss-chunk-tokens", "16")[2]
    if after_a_step:
        criterion(model, batch), chunked(model, batch)
    with doubled(model.decoder.output_projection):
        loss = criterion(model, batch)[0]
        with monkeypatch.context() as patch:  # the division path, by hand: the same loss
            patch.setattr(tempered_ce, "plain_output_projection", lambda model: None)
            expected = tiny_transformer(toy_data)[2](model, batch)[0]
        torch.testing.assert_close(loss, expected)
        plain = tiny_transformer(toy_data)[1]
        plain.load_state_dict(model.state_dict())
        assert not torch.allclose(tiny_transformer(toy_data)[2](plain, batch)[0], loss)  # it counts
        with pytest.raises(
            ValueError, match="output projection runs more when called .* --loss-chunk-tokens 0"
        ):
            chunked(model, batch)


@pytest.mark.parametrize("bias", [False, True])
def test_scaled_product_into_a_buffer_ignores_what_the_buffer_held(bias):
    """The chunk's logits / T written into a reused buffer: what it held (here NaN) takes no part
    (beta = 0 without a bias), and the result is the float64 product divided by T to fp32 rounding."""
    from fairseq_ctemp.criterions.chunked_loss import scaled_product

    g = torch.Generator().manual_seed(0)
    x, weight = torch.randn(9, 8, generator=g), torch.randn(50, 8, generator=g)
    b = torch.randn(50, generator=g) if bias else None
    out = torch.full((9, 50), float("nan"))
    got = scaled_product(x, weight, None if b is None else b / 3.0, 1 / 3.0, out=out)
    expected = (x.double() @ weight.double().T + (0 if b is None else b.double())) / 3.0
    assert got.data_ptr() == out.data_ptr()
    torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=1e-6)
