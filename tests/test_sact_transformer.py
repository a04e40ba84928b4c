"""sact_transformer: the SACT cross-attention against a slow float64 reference of its equations,
incremental = full decoding with beam reordering, beam search of a batch = each sentence alone,
normalised outputs, tau in [1/lambda, lambda], `none` / fixed tau = 1 / the initialisation = fairseq's
transformer, bad options; and through fairseq's CLIs (run in this process: conftest.run_fairseq):
tempered_ce training, resume, safe loading, fairseq-generate at the training temperature, batched =
one sentence at a time, the heatmap script."""

import argparse
import json
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from conftest import FAST_DECODE, PLUGIN_DIR, TRAIN_DEFAULTS, RawModel, json_log_records, run_fairseq
from fairseq.data import Dictionary
from fairseq.models.transformer import TransformerModel
from fairseq.sequence_generator import SequenceGenerator
from test_decoding_temperature import assert_scored_at, cli_hypotheses

import fairseq_ctemp  # noqa: F401  (the decoding rule and the safe-loading allowlist, as in any script)
from fairseq_ctemp.models.sact_transformer import SactTransformerModel, sact_transformer_tiny
from fairseq_ctemp.modules.sact_multihead_attention import PREVIOUS_CONTEXTS, SCOPES, SactMultiheadAttention

VARIANTS = {
    "sact": dict(sact_lambda=3.0),
    "head": dict(sact_temperature_scope="head"),
    "tempered": dict(sact_previous_context="tempered", sact_lambda=2.0),
    "tempered-head": dict(sact_previous_context="tempered", sact_temperature_scope="head"),
    "fixed": dict(attention_temperature="fixed", fixed_attention_temperature=0.7),
    "none": dict(attention_temperature="none"),
}
LEARNED = ["sact", "head", "tempered", "tempered-head"]


def dictionary(n=20):
    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}")
    return d


def build(seed=0, vocab=None, temperature_scale=0.5, model_class=SactTransformerModel, **options):
    """A tiny model (1 encoder, 2 decoder layers, 32-d, 2 heads). W_c and U_s start at zero (tau = 1):
    they are drawn from uniform(-scale, scale) so that tau varies."""
    vocab = vocab or dictionary()
    args = argparse.Namespace(**options)
    sact_transformer_tiny(args)
    torch.manual_seed(seed)
    task = SimpleNamespace(source_dictionary=vocab, target_dictionary=vocab)
    model = model_class.build_model(args, task)
    for name, p in model.named_parameters():
        if ".temperature_" in name:
            p.data.uniform_(-temperature_scale, temperature_scale)
    return model.eval()


def batch(vocab, lengths=(7, 5, 2), tgt_len=6, seed=1):
    """Left-padded sources sorted by length (as fairseq collates them) and target prefixes."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), vocab.pad())
    for b, n in enumerate(lengths):
        words = torch.randint(vocab.nspecial, len(vocab), (n - 1,), generator=g)
        src[b, max(lengths) - n :] = torch.cat([words, torch.tensor([vocab.eos()])])
    prev = torch.randint(vocab.nspecial, len(vocab), (len(lengths), tgt_len), generator=g)
    prev[:, 0] = vocab.eos()
    return src, torch.tensor(lengths), prev


# ------------------------------------------------------------------ the attention layer, by hand
def softmax_list(values):
    top = max(values)
    z = [math.exp(v - top) for v in values]
    return [x / sum(z) for x in z]


def reference_attention(layer, s, h, lam, previous_context, fixed=None):
    """The module docstring's equations for one unpadded sentence, in float64, one target position,
    head and source word at a time. s: T x D query states, h: S x D_k encoder states; ``fixed``: the
    constant tau of mode "fixed" (then lam and previous_context are unused).
    Returns (outputs T x D, alpha T x H x S, tau T x K)."""
    P = {name: p.detach().double() for name, p in layer.named_parameters()}
    heads, hd = layer.num_heads, layer.head_dim
    if fixed is None:
        w_c, u_s = P["temperature_context_proj.weight"], P["temperature_state_proj.weight"]
    else:  # one tau for every position and head: lambda ** 1 with lambda = the fixed tau
        w_c, u_s, lam = torch.zeros(1, layer.embed_dim, dtype=torch.float64), None, fixed
    k_taus = w_c.size(0)
    s, h = s.double(), h.double()
    q = [(P["q_proj.weight"] @ x + P["q_proj.bias"]) / math.sqrt(hd) for x in s]
    k = [P["k_proj.weight"] @ x + P["k_proj.bias"] for x in h]
    v = [P["v_proj.weight"] @ x + P["v_proj.bias"] for x in h]
    head = [slice(j * hd, (j + 1) * hd) for j in range(heads)]

    def context(weights):  # concat_h sum_i alpha_{h,i} v_{h,i}
        return torch.cat([sum(a * v[i][head[j]] for i, a in enumerate(weights[j])) for j in range(heads)])

    prev = torch.zeros(w_c.size(1), dtype=torch.float64)  # c_{-1} = 0
    outs, alphas, taus = [], [], []
    for t in range(len(s)):
        tau = [
            lam ** (1.0 if fixed is not None else math.tanh(float(w_c[j] @ prev + u_s[j] @ s[t])))
            for j in range(k_taus)
        ]
        scores = [[float(q[t][head[j]] @ k[i][head[j]]) for i in range(len(h))] for j in range(heads)]
        alpha = [
            softmax_list([e / tau[j if k_taus == heads else 0] for e in scores[j]]) for j in range(heads)
        ]
        outs.append(P["out_proj.weight"] @ context(alpha) + P["out_proj.bias"])
        alphas.append(alpha)
        taus.append(tau)
        prev = (
            context(alpha) if previous_context == "tempered" else context([softmax_list(e) for e in scores])
        )
    return (
        torch.stack(outs),
        torch.tensor(alphas, dtype=torch.float64),
        torch.tensor(taus, dtype=torch.float64),
    )


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("previous_context", PREVIOUS_CONTEXTS)
@torch.no_grad()
def test_attention_matches_a_slow_reference_of_the_formula(scope, previous_context):
    lam, lengths, tgt_len = 2.5, (7, 5, 2), 6
    torch.manual_seed(0)
    layer = SactMultiheadAttention(
        12, 3, kdim=10, vdim=10, lam=lam, scope=scope, previous_context=previous_context
    ).eval()
    for p in layer.parameters():
        p.data.uniform_(-0.6, 0.6)
    query = torch.randn(tgt_len, len(lengths), 12)
    source = torch.randn(max(lengths), len(lengths), 10)
    padding = torch.tensor([[i < max(lengths) - n for i in range(max(lengths))] for n in lengths])
    out, alpha = layer(
        query, source, source, key_padding_mask=padding, static_kv=True, need_head_weights=True
    )
    tau = layer.last_temperature
    assert tau.shape == (len(lengths), tgt_len, 3 if scope == "head" else 1)
    assert tau.std() > 0.1  # the temperature really varies
    for b, n in enumerate(lengths):
        ref_out, ref_alpha, ref_tau = reference_attention(
            layer, query[:, b], source[max(lengths) - n :, b], lam, previous_context
        )
        torch.testing.assert_close(tau[b].double(), ref_tau, atol=1e-5, rtol=0)
        torch.testing.assert_close(
            alpha[:, b, :, max(lengths) - n :].double(), ref_alpha.transpose(0, 1), atol=1e-5, rtol=0
        )
        assert alpha[:, b, :, : max(lengths) - n].abs().max() == 0 if n < max(lengths) else True  # padding
        torch.testing.assert_close(out[:, b].double(), ref_out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("tau", [0.3, 1.7])
@torch.no_grad()
def test_fixed_temperature_matches_the_slow_reference(tau):
    """Mode "fixed" (the paper's ablation): every score divided by one constant tau."""
    lengths, tgt_len = (7, 5, 2), 4
    torch.manual_seed(0)
    layer = SactMultiheadAttention(12, 3, kdim=10, vdim=10, mode="fixed", fixed_temperature=tau).eval()
    for p in layer.parameters():
        p.data.uniform_(-0.6, 0.6)
    query, source = torch.randn(tgt_len, len(lengths), 12), torch.randn(max(lengths), len(lengths), 10)
    padding = torch.tensor([[i < max(lengths) - n for i in range(max(lengths))] for n in lengths])
    out, alpha = layer(
        query, source, source, key_padding_mask=padding, static_kv=True, need_head_weights=True
    )
    assert layer.last_temperature is None
    for b, n in enumerate(lengths):
        ref_out, ref_alpha, _ = reference_attention(
            layer, query[:, b], source[max(lengths) - n :, b], None, None, fixed=tau
        )
        torch.testing.assert_close(
            alpha[:, b, :, max(lengths) - n :].double(), ref_alpha.transpose(0, 1), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(out[:, b].double(), ref_out, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_the_temperature_reads_the_attention_before_its_dropout():
    """c_{t-1} is the context without attention dropout: tau is the same in training and evaluation,
    while the output (with dropout) is not."""
    torch.manual_seed(0)
    layer = SactMultiheadAttention(8, 2, dropout=0.5)
    for p in layer.parameters():
        p.data.uniform_(-0.6, 0.6)
    query, source = torch.randn(5, 3, 8), torch.randn(4, 3, 8)
    out_eval, _ = layer.eval()(query, source, source, static_kv=True)
    tau_eval = layer.last_temperature
    out_train, _ = layer.train()(query, source, source, static_kv=True)
    assert torch.equal(layer.last_temperature, tau_eval)
    assert not torch.allclose(out_train, out_eval)


@pytest.mark.parametrize("variant", LEARNED)
def test_training_gradients_are_finite_with_padding_and_reach_the_temperature(variant):
    """From the initialisation (W_c = U_s = 0, so tau = 1), on a padded batch: every gradient is
    finite (the padding's -inf scores must not reach tau) and W_c and U_s get one."""
    model = build(temperature_scale=0.0, **VARIANTS[variant]).train()
    vocab = model.decoder.dictionary
    src, lengths, prev = batch(vocab)
    logits, _ = model(src, lengths, prev)
    F.cross_entropy(logits.view(-1, logits.size(-1)), prev.roll(-1, 1).view(-1)).backward()
    for name, p in model.named_parameters():
        assert torch.isfinite(p.grad).all(), name
        if ".temperature_" in name:
            assert p.grad.abs().max() > 0, name


# ----------------------------------------------------------------------- the model, in-process
@pytest.mark.parametrize("variant", list(VARIANTS))
@torch.no_grad()
def test_incremental_decoding_with_beam_reordering_equals_the_full_forward_pass(variant):
    model = build(**VARIANTS[variant])
    vocab = model.decoder.dictionary
    src, lengths, prev = batch(vocab, tgt_len=7)
    new_order = torch.tensor([2, 0, 0, 1])  # beam search: hypotheses move, some are duplicated
    after = 3  # reorder after this many steps
    reordered_prev = prev.index_select(0, new_order)
    encoder_out = model.encoder(src, lengths)
    full_logits, full_extra = model.decoder(
        reordered_prev, encoder_out=model.encoder.reorder_encoder_out(encoder_out, new_order)
    )
    state, steps = {}, []
    for t in range(prev.size(1)):
        if t == after:
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, new_order)
            model.decoder.reorder_incremental_state_scripting(state, new_order)
        tokens = (prev if t < after else reordered_prev)[:, : t + 1]
        logits, extra = model.decoder(tokens, encoder_out=encoder_out, incremental_state=state)
        assert logits.size(1) == 1  # one step at a time
        steps.append((logits[:, 0], extra))
    learned = full_extra["attention_temperature"] is not None
    assert learned == (variant in LEARNED)
    for t, (logits, extra) in enumerate(steps):
        rows = new_order if t < after else torch.arange(4)
        torch.testing.assert_close(logits.index_select(0, rows), full_logits[:, t], atol=1e-5, rtol=1e-5)
        attn = extra["attn"][0][:, 0]  # the last layer's alignment, averaged over heads
        torch.testing.assert_close(
            attn.index_select(0, rows), full_extra["attn"][0][:, t], atol=1e-6, rtol=1e-5
        )
        if learned:
            tau = extra["attention_temperature"][:, 0]
            torch.testing.assert_close(tau.index_select(0, rows), full_extra["attention_temperature"][:, t])


@pytest.mark.parametrize("shared", [False, True], ids=["", "beam-shared-source"])
@pytest.mark.parametrize("variant", ["sact", "head", "tempered"])
@torch.no_grad()
def test_beam_search_of_a_batch_equals_each_sentence_alone_and_its_teacher_forced_scores(variant, shared):
    """SequenceGenerator reorders the hypotheses at every step and drops finished sentences: each
    sentence of a padded batch must get the hypotheses and scores it gets alone (no padding), and
    those are the teacher-forced scores. With ``set_beam_size`` fairseq's attention also keeps one
    copy of the source per beam (its "beamable" path)."""
    model = build(**VARIANTS[variant])
    if shared:
        model.decoder.set_beam_size(4)
    vocab = model.decoder.dictionary
    src, lengths, _ = batch(vocab, lengths=(9, 7, 5, 2))
    generator = SequenceGenerator([model], vocab, beam_size=4, max_len_a=0, max_len_b=8)
    results = generator.forward({"net_input": {"src_tokens": src, "src_lengths": lengths}})
    for b, nbest in enumerate(results):
        sentence = src[b : b + 1, src.size(1) - lengths[b] :]
        alone = generator.forward({"net_input": {"src_tokens": sentence, "src_lengths": lengths[b : b + 1]}})[
            0
        ]
        assert [h["tokens"].tolist() for h in nbest] == [h["tokens"].tolist() for h in alone]
        for hyp, hyp_alone in zip(nbest, alone):
            torch.testing.assert_close(
                hyp["positional_scores"], hyp_alone["positional_scores"], atol=1e-5, rtol=0
            )
            tokens = hyp["tokens"]
            prev = torch.cat([torch.tensor([vocab.eos()]), tokens[:-1]])[None]
            model.decoder.set_beam_size(1)  # teacher forcing: one row, no beam to share the source
            logits, _ = model(sentence, lengths[b : b + 1], prev)
            model.decoder.set_beam_size(4 if shared else 1)
            scored = torch.log_softmax(logits[0].double(), -1).gather(1, tokens[:, None])[:, 0]
            torch.testing.assert_close(hyp["positional_scores"].double(), scored, atol=1e-5, rtol=0)


@torch.no_grad()
def test_tau_of_every_layer_or_none_where_layerdrop_skipped_one():
    """extra["attention_temperature"] (bsz x T x layers x K) is each layer's tau of this call; in
    training with --decoder-layerdrop a call that skipped a layer has none (no stale tau of an
    earlier call stands in for it); in evaluation every layer runs."""
    model = build(decoder_layerdrop=0.5)
    src, lengths, prev = batch(model.decoder.dictionary)
    layers = [layer.encoder_attn for layer in model.decoder.layers]
    model.train()
    torch.manual_seed(3)
    complete, skipped = 0, 0
    for _ in range(20):
        tau = model(src, lengths, prev)[1]["attention_temperature"]
        if tau is None:
            skipped += 1
            assert any(layer.last_temperature is None for layer in layers)
        else:
            complete += 1
            assert tau.shape == (3, prev.size(1), 2, 1)
            torch.testing.assert_close(tau, torch.stack([layer.last_temperature for layer in layers], 2))
    assert complete and skipped  # both kinds of call happened
    model.eval()
    assert model(src, lengths, prev)[1]["attention_temperature"].shape == (3, prev.size(1), 2, 1)


@pytest.mark.parametrize("variant", list(VARIANTS))
@torch.no_grad()
def test_every_output_row_and_attention_row_is_a_normalised_distribution(variant):
    model = build(**VARIANTS[variant])
    src, lengths, prev = batch(model.decoder.dictionary)
    net_output = model(src, lengths, prev)
    probs = model.get_normalized_probs(net_output, log_probs=False).double()
    assert probs.min() >= 0
    torch.testing.assert_close(
        probs.sum(-1), torch.ones(probs.shape[:-1], dtype=torch.float64), atol=1e-6, rtol=0
    )
    attn = net_output[1]["attn"][0].double()  # batch x target x source
    torch.testing.assert_close(
        attn.sum(-1), torch.ones(attn.shape[:-1], dtype=torch.float64), atol=1e-6, rtol=0
    )
    for b, n in enumerate(lengths.tolist()):
        assert attn[b, :, : src.size(1) - n].abs().sum() == 0  # left padding gets no attention


@pytest.mark.parametrize("scope", SCOPES)
@torch.no_grad()
def test_tau_lies_in_one_over_lambda_to_lambda_and_reaches_both_ends(scope):
    lam = 2.0
    vocab = dictionary()
    src, lengths, prev = batch(vocab, tgt_len=12)
    moderate = build(sact_lambda=lam, sact_temperature_scope=scope)(src, lengths, prev)[1]
    tau = moderate["attention_temperature"]
    assert tau.shape == (3, 12, 2, 2 if scope == "head" else 1)  # batch x target x layers x K
    assert 1 / lam < tau.min() and tau.max() < lam and tau.std() > 0.1
    # large W_c and U_s saturate tanh: tau reaches the bounds, and never leaves them
    saturated = build(sact_lambda=lam, sact_temperature_scope=scope, temperature_scale=50.0)
    tau = saturated(src, lengths, prev)[1]["attention_temperature"].double()
    assert tau.min() >= (1 / lam) * (1 - 1e-6) and tau.max() <= lam * (1 + 1e-6)
    assert tau.min() < (1 / lam) * (1 + 1e-4) and tau.max() > lam * (1 - 1e-4)


def stock_transformer(vocab):
    """fairseq's transformer with the dimensions of sact_transformer_tiny."""
    return build(vocab=vocab, model_class=TransformerModel, temperature_scale=0.0)


@pytest.mark.parametrize(
    "options",
    [
        dict(attention_temperature="none"),
        dict(attention_temperature="fixed", fixed_attention_temperature=1.0),
        dict(attention_temperature="sact", temperature_scale=0.0),  # as initialised: tau = 1
        dict(attention_temperature="sact", sact_previous_context="tempered", temperature_scale=0.0),
    ],
    ids=["none", "fixed-1", "sact-init", "tempered-init"],
)
@torch.no_grad()
def test_none_fixed_one_and_the_initialisation_are_fairseqs_transformer(options):
    vocab = dictionary()
    stock = stock_transformer(vocab)
    ours = build(vocab=vocab, seed=1, **options)
    stock_keys = [(k, v.shape) for k, v in stock.state_dict().items()]
    extra = [k for k in ours.state_dict() if ".temperature_" in k]
    assert [(k, v.shape) for k, v in ours.state_dict().items() if k not in extra] == stock_keys
    assert len(extra) == (4 if options["attention_temperature"] == "sact" else 0)  # 2 layers x W_c, U_s
    missing, unexpected = ours.load_state_dict(stock.state_dict(), strict=False)
    assert sorted(missing) == sorted(extra) and not unexpected
    src, lengths, prev = batch(vocab)
    (logits, extra_out), (stock_logits, stock_extra) = ours(src, lengths, prev), stock(src, lengths, prev)
    assert torch.equal(logits, stock_logits)
    assert torch.equal(extra_out["attn"][0], stock_extra["attn"][0])
    generate = lambda m: SequenceGenerator([m], vocab, beam_size=3, max_len_a=0, max_len_b=6).forward(  # noqa: E731
        {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    )
    for ours_nbest, stock_nbest in zip(generate(ours), generate(stock)):
        for a, b in zip(ours_nbest, stock_nbest):
            assert torch.equal(a["tokens"], b["tokens"]) and torch.equal(
                a["positional_scores"], b["positional_scores"]
            )


@pytest.mark.parametrize(
    "options,message",
    [
        (dict(sact_lambda=1.0), r"^--sact-lambda must be a finite number > 1 .*got 1.0$"),
        (dict(sact_lambda=0.5), r"^--sact-lambda must be a finite number > 1"),
        (dict(sact_lambda=float("inf")), r"^--sact-lambda must be a finite number > 1"),
        (
            dict(attention_temperature="fixed", fixed_attention_temperature=0.0),
            r"^--fixed-attention-temperature must be a finite number > 0 .*got 0.0$",
        ),
        (
            dict(attention_temperature="fixed"),
            r"^--attention-temperature fixed needs --fixed-attention-temperature",
        ),
        (
            dict(fixed_attention_temperature=0.9),
            r"^--fixed-attention-temperature is only used with --attention-temperature fixed, not sact$",
        ),
        (
            dict(attention_temperature="fixed", fixed_attention_temperature=0.9, sact_lambda=2.0),
            r"^--sact-lambda is only used with --attention-temperature sact, not fixed$",
        ),
        (
            dict(
                attention_temperature="fixed", fixed_attention_temperature=0.9, sact_temperature_scope="head"
            ),
            r"^--sact-temperature-scope is only used with --attention-temperature sact, not fixed$",
        ),
        (
            dict(attention_temperature="none", sact_previous_context="tempered"),
            r"^--sact-previous-context is only used with --attention-temperature sact, not none$",
        ),
        (
            dict(sact_temperature_scope="token"),
            r"^--sact-temperature-scope must be one of layer, head, got 'token'$",
        ),
        (
            dict(sact_previous_context="exact"),
            r"^--sact-previous-context must be one of untempered, tempered, got 'exact'$",
        ),
        (
            dict(attention_temperature="sact_released"),
            r"^--attention-temperature must be one of sact, fixed, none, got 'sact_released'$",
        ),
        (dict(no_cross_attention=True), r"^--no-cross-attention leaves no encoder-decoder attention"),
        (
            dict(decoder_attention_heads=3),
            r"^--decoder-embed-dim 32 must be a multiple of --decoder-attention-heads 3 \(an integer >= 1\)",
        ),
        (
            dict(share_all_embeddings=True, decoder_embed_dim=48, decoder_attention_heads=2),
            r"^--share-all-embeddings needs --encoder-embed-dim \(32\) equal to --decoder-embed-dim \(48\)$",
        ),
    ],
    ids=lambda x: str(x)[:70] if isinstance(x, dict) else "",
)
def test_bad_options_are_refused_before_the_model_is_built(options, message):
    with pytest.raises(ValueError, match=message):
        build(**options)


def test_shared_embeddings_need_one_dictionary():
    args = argparse.Namespace(share_all_embeddings=True)
    sact_transformer_tiny(args)
    task = SimpleNamespace(source_dictionary=dictionary(20), target_dictionary=dictionary(21))
    with pytest.raises(
        ValueError, match=r"^--share-all-embeddings needs one dictionary .*--joined-dictionary"
    ):
        SactTransformerModel.build_model(args, task)


def test_alt_architectures_are_the_alt_sweep_presets_with_sact():
    """sact_transformer_alt_{mini,base} give the model of the ALT recipe's transformer presets
    (every model option the same as with --arch transformer and the preset's flags)."""
    from fairseq import options

    from fairseq_ctemp.alt.presets import PRESETS

    def model_args(argv):
        parsed = options.parse_args_and_arch(
            options.get_training_parser(), ["data", "--user-dir", PLUGIN_DIR, "--task", "translation", *argv]
        )
        return {k: v for k, v in vars(parsed).items() if k not in ("arch", "_name")}

    parser = argparse.ArgumentParser()
    TransformerModel.add_args(parser)
    model_options = [a.dest for a in parser._actions if a.dest != "help"]
    assert "encoder_ffn_embed_dim" in model_options and "share_decoder_input_output_embed" in model_options
    for preset in ("mini", "base"):
        flags = list(PRESETS[preset].train)
        arch_at = flags.index("--arch")
        assert flags[arch_at + 1] == "transformer"
        stock = model_args(flags)
        ours = model_args(
            ["--arch", f"sact_transformer_alt_{preset}"] + flags[:arch_at] + flags[arch_at + 2 :]
        )
        sact_only = {k: v for k, v in ours.items() if k not in stock}
        assert sact_only == {
            "attention_temperature": "sact",
            "sact_lambda": None,
            "fixed_attention_temperature": None,
            "sact_temperature_scope": None,
            "sact_previous_context": None,
        }
        assert {k: v for k, v in ours.items() if k in stock} == stock
        # and the architecture alone gives the preset's model: every option of fairseq's transformer
        alone = model_args(["--arch", f"sact_transformer_alt_{preset}"])
        for key in model_options:
            assert alone.get(key) == stock.get(key), (preset, key)


# --------------------------------------------------------- fairseq's CLIs on the toy corpus
T_TRAIN, LAMBDA = 2.0, 3.0
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
TRAIN = [
    "--arch",
    "sact_transformer_tiny",
    "--sact-lambda",
    str(LAMBDA),
    "--share-all-embeddings",
    "--dropout",
    "0.1",
    "--attention-dropout",
    "0.1",  # its RNG, too, must survive a resume
    "--criterion",
    "tempered_ce",
    "--softmax-temperature",
    str(T_TRAIN),
    *TRAIN_DEFAULTS,
    "--max-tokens",
    "500",  # 28 updates an epoch
]


def train(data, save_dir, epochs, *extra, check=True):
    return run_fairseq(
        "fairseq-train",
        data,
        "--user-dir",
        PLUGIN_DIR,
        *TRAIN,
        *extra,
        "--max-epoch",
        epochs,
        "--save-dir",
        save_dir,
        env=ONE_THREAD,
        check=check,
    )


@pytest.fixture(scope="module")
def trained(toy_data, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("sact-transformer")
    return {"dir": save_dir, "log": train(toy_data["bin"], save_dir, 2).stdout}


@pytest.mark.e2e
def test_training_with_tempered_ce_learns(trained):
    log = trained["log"]
    assert (
        "SactTransformerModel" in log
        and "mode=sact, lambda=3, scope=layer, previous_context=untempered" in log
    )
    valid = json_log_records(log, "valid")
    assert [r["epoch"] for r in valid] == [1, 2]
    assert float(valid[1]["valid_loss"]) < float(valid[0]["valid_loss"]) - 0.5


@pytest.mark.e2e
def test_resume_from_checkpoint_gives_the_same_losses_as_an_uninterrupted_run(
    trained, toy_data, tmp_path, monkeypatch
):
    monkeypatch.setenv("CTEMP_EXACT_RESUME", "1")  # the plugin's exact resume (opt-in)
    first = train(toy_data["bin"], tmp_path, 1).stdout
    resumed = train(toy_data["bin"], tmp_path, 2).stdout
    assert "Loaded checkpoint" in resumed and "(epoch 2 @" in resumed
    interrupted = json_log_records(first + resumed, "train")
    uninterrupted = json_log_records(trained["log"], "train")
    assert [r["epoch"] for r in interrupted] == [r["epoch"] for r in uninterrupted] == [1, 2]
    for a, b in zip(uninterrupted, interrupted):
        for key in ("train_loss", "train_nll_loss", "train_gnorm"):
            assert a[key] == b[key], (a["epoch"], key)
    assert [r["valid_loss"] for r in json_log_records(trained["log"], "valid")] == [
        r["valid_loss"] for r in json_log_records(first + resumed, "valid")
    ]


@pytest.mark.e2e
def test_checkpoint_loads_with_torchs_safe_loading(trained):
    state = torch.load(trained["dir"] / "checkpoint_last.pt", weights_only=True)
    weights = state["model"]
    for layer in (0, 1):
        for name in ("temperature_context_proj", "temperature_state_proj"):
            assert weights[f"decoder.layers.{layer}.encoder_attn.{name}.weight"].shape == (1, 32)
    assert weights["decoder.layers.0.encoder_attn.temperature_state_proj.weight"].abs().max() > 0  # trained
    assert state["cfg"]["model"].sact_lambda == LAMBDA


@pytest.fixture(scope="module")
def raw_model(trained, toy_data):
    return RawModel(trained["dir"] / "checkpoint_last.pt", toy_data["bin"])


@pytest.mark.e2e
def test_generate_decodes_at_the_training_temperature(trained, toy_data, raw_model):
    """fairseq-generate's beam-5 scores are log softmax(D / T) of the teacher-forced logits D
    (float64, from fairseq's own loader), and measurably not at T = 1."""
    out = run_fairseq(
        "fairseq-generate",
        toy_data["bin"],
        "--user-dir",
        PLUGIN_DIR,
        "--path",
        trained["dir"] / "checkpoint_last.pt",
        "--gen-subset",
        "test",
        "--beam",
        "5",
        "--max-sentences",
        "16",
        *FAST_DECODE,
        "--num-workers",
        "0",
        env=ONE_THREAD,
    ).stdout
    assert f"decoding at training temperature T={T_TRAIN:g}" in out
    hyps = cli_hypotheses(out, raw_model.dictionary)
    assert len(hyps) == 80
    for _, src, tokens, scores in hyps:
        assert_scored_at(scores, [(raw_model, T_TRAIN)], tokens, src, atol=2e-3, base=2)


@pytest.mark.e2e
def test_generate_in_batches_equals_one_sentence_at_a_time(trained, toy_data):
    """Beam reordering, shared encoder states, padding and finished sentences leaving the batch
    must not change any sentence's result."""

    def generate(batch_size):
        out = run_fairseq(
            "fairseq-generate",
            toy_data["bin"],
            "--user-dir",
            PLUGIN_DIR,
            "--path",
            trained["dir"] / "checkpoint_last.pt",
            "--gen-subset",
            "valid",
            "--beam",
            "5",
            "--nbest",
            "2",
            *FAST_DECODE,
            "--batch-size",
            batch_size,
            "--required-batch-size-multiple",
            "1",  # fairseq 0.12 loses sentences with --batch-size < its default multiple 8
            "--num-workers",
            "0",
            env=ONE_THREAD,
        ).stdout
        result = {}  # id -> [(hypothesis, score, positional scores)]
        for line in out.splitlines():
            key, *fields = line.split("\t")
            if key.startswith("H-"):
                result.setdefault(int(key[2:]), []).append([fields[1], float(fields[0])])
            elif key.startswith("P-"):
                result[int(key[2:])][-1].append([float(x) for x in fields[0].split()])
        assert sorted(result) == list(range(80)) and all(len(h) == 2 for h in result.values())
        return result

    batched, alone = generate(64), generate(1)
    for i in range(80):
        for (text, score, positional), (text_1, score_1, positional_1) in zip(batched[i], alone[i]):
            assert text == text_1 and abs(score - score_1) < 1e-5, i
            assert max(abs(a - b) for a, b in zip(positional, positional_1)) < 1.5e-4, i  # 4 decimals


def run_heatmap_script(*args):
    from fairseq_ctemp.cli import sact_heatmaps

    sact_heatmaps.main([str(a) for a in args])


@pytest.mark.e2e
def test_heatmap_script_plots_tau_per_layer_and_target_token(trained, toy_data, raw_model, tmp_path, capsys):
    sentences = tmp_path / "src.txt"
    references = tmp_path / "ref.txt"
    sentences.write_text("\n".join((toy_data["raw"] / "test.src").read_text().splitlines()[:2]) + "\n")
    references.write_text("\n".join((toy_data["raw"] / "test.tgt").read_text().splitlines()[:2]) + "\n")
    out = tmp_path / "heatmaps"
    run_heatmap_script(
        toy_data["bin"],
        *("--path", trained["dir"] / "checkpoint_last.pt", "--input", sentences, "--references", references),
        *("--out-dir", out, "-s", "src", "-t", "tgt"),
    )
    dump = json.loads((out / "sact_attention.json").read_text())
    assert dump["mode"] == "sact" and dump["lambda"] == LAMBDA and dump["tau_rows"] == ["layer 1", "layer 2"]
    d = raw_model.dictionary
    for i, (sentence, ref) in enumerate(zip(dump["sentences"], references.read_text().splitlines())):
        assert sentence["target_tokens"] == ref.split() + ["</s>"]
        # the model's own tau (fairseq's loader, teacher forced) for every target token and layer
        src = torch.tensor([d.index(w) for w in sentence["source_tokens"]])
        tokens = torch.tensor([d.index(w) for w in sentence["target_tokens"]])
        prev = torch.cat([torch.tensor([d.eos()]), tokens[:-1]])
        with torch.no_grad():
            _, extra = raw_model.model(src[None], torch.tensor([len(src)]), prev[None])
        expected = extra["attention_temperature"][0, :, :, 0]  # target x layers
        torch.testing.assert_close(torch.tensor(sentence["tau"]), expected, atol=1e-6, rtol=0)
        assert all(1 / LAMBDA <= t <= LAMBDA for row in sentence["tau"] for t in row)
        attention = sentence["attention"]
        assert len(attention) == len(tokens) and all(abs(sum(row) - 1) < 1e-4 for row in attention)
        assert (out / f"sentence{i + 1}.png").read_bytes()[:4] == b"\x89PNG"
    for j, summary in enumerate(dump["tau_summary"]):  # per layer, over every target token
        every = [row[j] for sentence in dump["sentences"] for row in sentence["tau"]]
        assert summary["row"] == f"layer {j + 1}" and summary["tokens"] == len(every)
        assert summary["mean"] == pytest.approx(sum(every) / len(every))
    assert "tau (layer 1) over the" in capsys.readouterr().out


@pytest.mark.e2e
@pytest.mark.parametrize(
    "options,message",
    [
        (["--sact-lambda", "1"], "--sact-lambda must be a finite number > 1"),
        (
            ["--attention-temperature", "fixed", "--fixed-attention-temperature", "0.9"],
            "--sact-lambda is only used with --attention-temperature sact, not fixed",
        ),
        (
            ["--sact-temperature-scope", "token"],
            "argument --sact-temperature-scope: invalid choice: 'token' (choose from 'layer', 'head')",
        ),
        (
            ["--attention-temperature", "sact_released"],
            "argument --attention-temperature: invalid choice: 'sact_released'",
        ),
    ],
    ids=["lambda", "conflict", "unknown-scope", "unknown-variant"],
)
def test_bad_options_end_fairseq_train_with_one_line_before_training(toy_data, tmp_path, options, message):
    proc = train(toy_data["bin"], tmp_path, 1, *options, check=False)
    assert proc.returncode != 0
    errors = [line for line in proc.stdout.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], proc.stdout[-2000:]
    assert "Traceback" not in proc.stdout and "begin training epoch" not in proc.stdout
