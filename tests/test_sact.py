"""SACT attention temperature and the sact_lstm translator: the formula against a
slow reference, incremental = full decoding (with beam reordering), plain attention = fairseq's
lstm, bad options, and train -> generate -> score -> resume -> heatmaps through the real CLIs."""

import errno
import json
import math
import os
import shlex
import shutil
import subprocess
from argparse import Namespace
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from conftest import (
    BIN_DIR,
    PLUGIN_DIR,
    REPO,
    TRAIN_DEFAULTS,
    example_script,
    hypotheses,
    json_log_records,
    run_fairseq,
)
from fairseq.data import Dictionary

from fairseq_ctemp.models.sact_lstm import SactLSTMConfig, SactLSTMModel
from fairseq_ctemp.modules import SactAttention

TINY = dict(
    dropout=0.0,
    encoder_embed_dim=8,
    encoder_hidden_size=6,
    encoder_layers=2,
    decoder_embed_dim=8,
    decoder_hidden_size=10,
    decoder_layers=2,
    decoder_out_embed_dim=7,
    max_source_positions=1024,
    max_target_positions=1024,
)


def dictionary(n=20):
    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}")
    return d


def build(seed=0, vocab=None, **options):
    vocab = vocab or dictionary()
    torch.manual_seed(seed)
    cfg = SactLSTMConfig(**{**TINY, **options})
    model = SactLSTMModel.build_model(cfg, SimpleNamespace(source_dictionary=vocab, target_dictionary=vocab))
    for p in model.parameters():  # larger weights than the uniform(-0.1, 0.1) init: tau varies
        p.data.uniform_(-0.8, 0.8)
    return model.eval()


def batch(vocab, lengths=(7, 5, 2), tgt_len=6, seed=1):
    """Left-padded sources sorted by length (as fairseq collates them) and target prefixes."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), vocab.pad())
    for b, n in enumerate(lengths):
        src[b, max(lengths) - n :] = torch.cat(
            [torch.randint(vocab.nspecial, len(vocab), (n - 1,), generator=g), torch.tensor([vocab.eos()])]
        )
    prev = torch.randint(vocab.nspecial, len(vocab), (len(lengths), tgt_len), generator=g)
    prev[:, 0] = vocab.eos()
    return src, torch.tensor(lengths), prev


def reference_decoder(model, src_tokens, prev_output_tokens, lam):
    """The paper's equations for one unpadded sentence, one step and one source word at a time:
    beta_t = tanh(w_c.c_(t-1) + u_s.s_t), tau_t = lam ** beta_t, alpha = softmax_i(e_ti / tau_t),
    with e_ti = h_i.(W_in s_t), input feeding, and c_(-1) = the top encoder layer's final state.
    Returns per-step (logits, tau, alpha) as plain lists."""
    dec, att = model.decoder, model.decoder.attention
    enc_out = model.encoder(src_tokens[None], torch.tensor([src_tokens.numel()]))
    h = enc_out[0][0]  # srclen x C (batch first; no padding: one sentence)
    hiddens = [dec.encoder_hidden_proj(enc_out[1][i, 0]) for i in range(dec.num_layers)]
    cells = [dec.encoder_cell_proj(enc_out[2][i, 0]) for i in range(dec.num_layers)]
    input_feed = torch.zeros(dec.hidden_size)
    c_prev = enc_out[1][-1, 0]
    w_c, u_s = att.temperature_context_proj.weight[0], att.temperature_state_proj.weight[0]
    steps = []
    for token in prev_output_tokens.tolist():
        x = torch.cat([dec.embed_tokens.weight[token], input_feed])
        for i, cell in enumerate(dec.layers):
            hiddens[i], cells[i] = cell(x[None], (hiddens[i][None], cells[i][None]))
            hiddens[i], cells[i] = hiddens[i][0], cells[i][0]
            x = hiddens[i]
        s = hiddens[-1]
        beta = math.tanh(float(torch.dot(w_c, c_prev)) + float(torch.dot(u_s, s)))
        tau = lam**beta
        query = att.input_proj.weight @ s
        e = [float(torch.dot(h[i], query)) for i in range(h.size(0))]
        z = [math.exp(v / tau) for v in e]
        alpha = [v / sum(z) for v in z]
        context = sum(a * h[i] for i, a in enumerate(alpha))
        out = torch.tanh(att.output_proj.weight @ torch.cat([context, s]))
        logits = dec.fc_out(dec.additional_fc(out))
        steps.append((logits, tau, alpha))
        input_feed, c_prev = out, context
    return steps


@torch.no_grad()
def test_sact_forward_matches_a_slow_reference_implementation_of_the_formula():
    lam = 3.0
    model = build(sact_lambda=lam)
    vocab = model.decoder.dictionary
    src, lengths, prev = batch(vocab)
    logits, extra = model(src, lengths, prev)
    taus, attn = extra["attention_temperature"], extra["attn"]
    assert taus.shape == (3, 6) and attn.shape == (3, 6, 7)
    assert taus.min() > 1 / lam and taus.max() < lam and taus.std() > 0.1  # tau really varies
    for b, n in enumerate(lengths.tolist()):
        sentence = src[b, src.size(1) - n :]  # unpadded
        for t, (ref_logits, ref_tau, ref_alpha) in enumerate(
            reference_decoder(model, sentence, prev[b], lam)
        ):
            assert abs(taus[b, t].item() - ref_tau) < 1e-5
            torch.testing.assert_close(attn[b, t, :n], torch.tensor(ref_alpha), atol=1e-5, rtol=0)
            assert attn[b, t, n:].abs().max() == 0 if n < 7 else True  # padding gets no attention
            torch.testing.assert_close(logits[b, t], ref_logits, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("count", [None, 4, 1])
def test_the_decoders_sact_steps_give_forwards_values_and_gradients(count):
    """SactSteps (u_s as a row of W_in, w_c . c_t as alpha_t . (w_c . h)) against forward called step
    by step with c_{t-1} (the path the slow reference above checks), padding included, float64;
    also made for one step (incremental decoding's calls: c_t projected at the next step) and
    called for more."""
    torch.manual_seed(0)
    layer = SactAttention(6, 8, 6, mode="sact", lam=3.0).double()
    h, c0 = torch.randn(3, 5, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    queries = torch.randn(4, 3, 6, dtype=torch.float64)

    def run(stepwise):
        layer.zero_grad()
        inputs = [x.detach().requires_grad_() for x in (h, c0, queries)]
        source, prev, qs = inputs
        step = layer.steps(source, padding, prev, count=count)
        results = []
        for q in qs:
            if stepwise:
                results.append(layer(q, source, padding, prev))
                prev = results[-1][2]
            else:
                results.append(step(q))
        outputs = [torch.stack([r[i] for r in results]) for i in range(3)]
        outputs.append(
            torch.stack([r[3] for r in results]) if stepwise else step.temperatures().t().contiguous()
        )
        sum(
            (o * torch.randn_like(o, generator=torch.Generator().manual_seed(i))).sum()
            for i, o in enumerate(outputs)
        ).backward()
        return outputs, [x.grad for x in inputs] + [p.grad.clone() for p in layer.parameters()]

    (values, grads), (expected_values, expected_grads) = run(stepwise=False), run(stepwise=True)
    assert expected_values[3].std() > 0.1  # tau varies
    for got, expected in zip(values + grads, expected_values + expected_grads):  # tau is fp32 in both
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-7)


@torch.no_grad()
def test_released_variant_is_exp_tanh_of_an_mlp_of_state_and_previous_context():
    torch.manual_seed(0)
    layer = SactAttention(10, 12, 10, mode="sact_released", released_dropout=0.3).eval()
    s, c_prev, h = torch.randn(4, 10), torch.randn(4, 12), torch.randn(4, 5, 12)
    out, alpha, context, tau = layer(s, h, prev_context=c_prev)
    lin1, lin2 = layer.temperature_mlp[0], layer.temperature_mlp[3]
    expected_tau = torch.exp(torch.tanh(lin2(F.selu(lin1(torch.cat([s, c_prev], 1)))))).squeeze(1)
    torch.testing.assert_close(tau, expected_tau)
    e = torch.einsum("bsc,bc->bs", h, layer.input_proj(s))
    torch.testing.assert_close(alpha, torch.softmax(e / expected_tau[:, None], dim=1))
    torch.testing.assert_close(context, torch.einsum("bs,bsc->bc", alpha, h))
    layer.train()  # its dropout sits after tanh, as in the authors' code: tau is random in training
    assert not torch.equal(layer(s, h, prev_context=c_prev)[3], layer(s, h, prev_context=c_prev)[3])


@torch.no_grad()
def test_fixed_temperature_divides_the_scores_and_fixed_one_is_plain_attention():
    vocab = dictionary()
    src, lengths, prev = batch(vocab)
    plain = build(attention_temperature="none", vocab=vocab)
    one = build(attention_temperature="fixed", fixed_attention_temperature=1.0, vocab=vocab)
    one.load_state_dict(plain.state_dict())
    assert torch.equal(plain(src, lengths, prev)[0], one(src, lengths, prev)[0])
    assert plain(src, lengths, prev)[1]["attention_temperature"] is None
    layer = SactAttention(6, 4, 6, mode="fixed", fixed_temperature=0.5)
    s, h = torch.randn(3, 6), torch.randn(3, 5, 4)
    e = torch.einsum("bsc,bc->bs", h, layer.input_proj(s))
    torch.testing.assert_close(layer(s, h)[1], torch.softmax(2 * e, dim=1))


@torch.no_grad()
def test_plain_attention_is_fairseqs_lstm_with_the_same_weights():
    from fairseq.models.lstm import LSTMModel, base_architecture

    ours = build(attention_temperature="none")
    vocab = ours.decoder.dictionary
    args = Namespace(
        encoder_bidirectional=True,
        encoder_embed_dim=8,
        encoder_hidden_size=6,
        encoder_layers=2,
        decoder_embed_dim=8,
        decoder_hidden_size=10,
        decoder_layers=2,
        decoder_out_embed_dim=7,
        dropout=0.0,
        criterion="cross_entropy",
    )
    base_architecture(args)
    stock = LSTMModel.build_model(
        args, SimpleNamespace(source_dictionary=vocab, target_dictionary=vocab)
    ).eval()
    assert set(stock.state_dict()) == set(ours.state_dict())  # same parameters, same names
    stock.load_state_dict(ours.state_dict())
    src, lengths, prev = batch(vocab)
    (logits, extra), (stock_logits, stock_attn) = ours(src, lengths, prev), stock(src, lengths, prev)
    torch.testing.assert_close(logits, stock_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(extra["attn"], stock_attn, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        dict(attention_temperature="sact", sact_lambda=2.0),
        dict(attention_temperature="sact_released"),
        dict(attention_temperature="fixed", fixed_attention_temperature=0.8),
        dict(attention_temperature="none"),
    ],
    ids=lambda o: o["attention_temperature"],
)
@torch.no_grad()
def test_incremental_decoding_with_beam_reordering_equals_the_full_forward_pass(options):
    model = build(**options)
    vocab = model.decoder.dictionary
    src, lengths, prev = batch(vocab, tgt_len=7)
    new_order = torch.tensor([2, 0, 0, 1])  # beam search: hypotheses move, some are duplicated
    after = 3  # reorder after this many steps
    reordered_prev = prev.index_select(0, new_order)
    encoder_out = model.encoder(src, lengths)
    full_logits, full_extra = model.decoder(  # the reordered batch, all steps at once
        reordered_prev, encoder_out=model.encoder.reorder_encoder_out(encoder_out, new_order)
    )
    state = {}
    steps = []
    for t in range(prev.size(1)):
        if t == after:
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, new_order)
            model.decoder.reorder_incremental_state_scripting(state, new_order)
        tokens = (prev if t < after else reordered_prev)[:, : t + 1]
        logits, extra = model.decoder(tokens, encoder_out=encoder_out, incremental_state=state)
        assert logits.size(1) == 1  # one step at a time
        steps.append((logits[:, 0], extra))
    for t, (logits, extra) in enumerate(steps):
        rows = new_order if t < after else torch.arange(4)
        torch.testing.assert_close(
            logits.index_select(0, rows) if t < after else logits, full_logits[:, t], atol=1e-5, rtol=1e-5
        )
        attn = extra["attn"][:, 0]
        torch.testing.assert_close(
            attn.index_select(0, rows) if t < after else attn, full_extra["attn"][:, t], atol=1e-6, rtol=1e-5
        )
        if full_extra["attention_temperature"] is not None:
            tau = extra["attention_temperature"][:, 0]
            torch.testing.assert_close(
                tau.index_select(0, rows) if t < after else tau, full_extra["attention_temperature"][:, t]
            )


@torch.no_grad()
def test_beam_search_scores_are_the_teacher_forced_scores_of_its_hypotheses():
    from fairseq.sequence_generator import SequenceGenerator

    model = build()
    vocab = model.decoder.dictionary
    src, lengths, _ = batch(vocab)
    generator = SequenceGenerator([model], vocab, beam_size=4, max_len_a=0, max_len_b=6)
    results = generator.forward({"net_input": {"src_tokens": src, "src_lengths": lengths}})
    for b, nbest in enumerate(results):
        assert len(nbest) == 4
        sentence = src[b : b + 1, src.size(1) - lengths[b] :]  # alone, without its padding
        for hyp in nbest:
            tokens = hyp["tokens"]
            prev = torch.cat([torch.tensor([vocab.eos()]), tokens[:-1]])[None]
            logits, _ = model(sentence, lengths[b : b + 1], prev)
            scored = torch.log_softmax(logits[0], -1).gather(1, tokens[:, None])[:, 0]
            torch.testing.assert_close(hyp["positional_scores"], scored, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "options,message",
    [
        (dict(sact_lambda=1.0), r"--sact-lambda must be a finite number > 1 .*got 1.0"),
        (
            dict(sact_lambda=0.5, attention_temperature="sact_released"),
            r"--sact-lambda must be a finite number > 1",
        ),
        (dict(sact_lambda=float("inf")), r"--sact-lambda must be a finite number > 1"),
        (
            dict(attention_temperature="fixed", fixed_attention_temperature=0.0),
            r"--fixed-attention-temperature must be a finite number > 0 .*got 0.0",
        ),
        (
            dict(attention_temperature="fixed", fixed_attention_temperature=-1.0),
            r"--fixed-attention-temperature must be a finite number > 0",
        ),
        (
            dict(attention_temperature="fixed"),
            r"--attention-temperature fixed needs --fixed-attention-temperature",
        ),
        (
            dict(fixed_attention_temperature=0.9),
            r"--fixed-attention-temperature is only used with "
            r"--attention-temperature fixed, not sact",
        ),
        (dict(attention_temperature="none", sact_lambda=2.0), r"--sact-lambda is only used with"),
        (
            dict(attention_temperature="sact_released", sact_released_dropout=1.0),
            r"--sact-released-dropout must be in \[0, 1\)",
        ),
        (
            dict(attention_temperature="softmax"),
            r"--attention-temperature must be one of sact, "
            r"sact_released, fixed, none",
        ),
        (dict(encoder_layers=1), r"--encoder-layers \(1\) must equal --decoder-layers \(2\)"),
        (dict(decoder_hidden_size=0), r"--decoder-hidden-size must be an integer >= 1, got 0"),
        (
            dict(share_all_embeddings=True, encoder_embed_dim=6),
            r"--share-all-embeddings needs --encoder-embed-dim \(6\) == --decoder-embed-dim \(8\)",
        ),
        (
            dict(share_decoder_input_output_embed=True),
            r"--decoder-embed-dim \(8\) == --decoder-out-embed-dim \(7\)",
        ),
        (dict(dropout=1.0), r"--dropout must be in \[0, 1\)"),
    ],
    ids=lambda x: str(x)[:60] if isinstance(x, dict) else "",
)
def test_bad_options_are_refused_at_build_time(options, message):
    with pytest.raises(ValueError, match=message):
        build(**options)


def test_share_all_embeddings_needs_a_joined_dictionary():
    src_dict, tgt_dict = dictionary(20), dictionary(21)
    cfg = SactLSTMConfig(**{**TINY, "decoder_out_embed_dim": 8, "share_all_embeddings": True})
    with pytest.raises(ValueError, match="--share-all-embeddings needs a joined dictionary"):
        SactLSTMModel.build_model(
            cfg, SimpleNamespace(source_dictionary=src_dict, target_dictionary=tgt_dict)
        )


# ------------------------------------------- the real CLIs (through examples/sact) on the toy corpus
T_TRAIN = 2.0
RECIPE = os.path.join(REPO, "examples", "sact")
ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # tiny models: threads only add spin-waiting on a busy machine
# train.sh VARIANT sact + these: lambda 3, dropout (its RNG must survive a resume), tempered_ce.
SACT_TRAIN = [
    "--sact-lambda",
    "3",
    "--dropout",
    "0.1",
    "--criterion",
    "tempered_ce",
    "--softmax-temperature",
    str(T_TRAIN),
    "--max-tokens",
    "2000",
    "--log-format",
    "json",
    "--log-interval",
    "1",
    "--num-workers",
    "0",
]


def recipe(script, *args, **env):
    """Run examples/sact/SCRIPT on the toy corpus (tiny model, CPU, one thread); returns stdout."""
    proc = recipe_run(script, *args, **env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def recipe_run(script, *args, **env):
    """recipe's run, whatever its exit status: the finished process."""
    full_env = dict(
        os.environ,
        PATH=BIN_DIR + os.pathsep + os.environ["PATH"],
        SRC="src",
        TGT="tgt",
        ARCH="sact_lstm_tiny",
        LR="3e-3",
        DEVICE_ARGS="--cpu",
        **ONE_THREAD,
        **env,
    )
    return subprocess.run(
        ["bash", os.path.join(RECIPE, script), *map(str, args)], env=full_env, text=True, capture_output=True
    )


@pytest.mark.parametrize(
    "variant, env, message",
    [
        ("sact", {"EVAL_BLEU": "2"}, "EVAL_BLEU must be 1 or 0, got '2'"),
        ("sact", {"EVAL_BLEU": "0", "BPE": "sentencepiece"}, "BPE is for validation BLEU"),
        ("none", {"SACT_LAMBDA": "2"}, "SACT_LAMBDA is only used by the sact and sact_released variants"),
        ("fixed:0.8", {"SACT_LAMBDA": "2"}, "SACT_LAMBDA is only used by the sact and sact_released"),
    ],
)
def test_train_recipe_refuses_settings_it_would_not_use(toy_data, tmp_path, variant, env, message):
    """train.sh: an environment setting the variant or the selection would ignore is an error
    before anything is written."""
    save_dir = tmp_path / "run"
    proc = subprocess.run(
        ["bash", os.path.join(RECIPE, "train.sh"), str(toy_data["bin"]), str(save_dir), variant],
        env={**os.environ, **env},
        text=True,
        capture_output=True,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"train.sh: error: {message}")
    assert not save_dir.exists()


def train(data, save_dir, epochs, in_process=False):
    """train.sh: fairseq-train with validation BLEU choosing checkpoint_best.pt; in_process: the
    fairseq-train command it prints with DRY_RUN=1, run in this process (conftest.run_fairseq)."""
    if not in_process:
        return recipe("train.sh", data, save_dir, "sact", *SACT_TRAIN, MAX_EPOCH=str(epochs))
    command = recipe("train.sh", data, save_dir, "sact", *SACT_TRAIN, MAX_EPOCH=str(epochs), DRY_RUN="1")
    name, *args = shlex.split(command)
    return run_fairseq(os.path.basename(name), *args, env=ONE_THREAD).stdout


@pytest.fixture(scope="module")
def sact_run(toy_data, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("sact")
    return {"dir": save_dir, "log": train(toy_data["bin"], save_dir, 3)}


@pytest.mark.parametrize(
    "variant, env, changed",
    [
        ("fixed:0.8", {}, ("variant=sact ", "variant=fixed:0.8 ")),
        ("sact", {"DECAY_FROM": "2"}, (" decay_from=12 ", " decay_from=2 ")),  # another lr schedule
        ("sact", {"EVAL_BLEU": "0"}, (" eval_bleu=1 ", " eval_bleu=0 ")),  # another best checkpoint
    ],
    ids=["variant", "schedule", "selection"],
)
def test_train_recipe_refuses_a_run_directory_started_otherwise(sact_run, toy_data, variant, env, changed):
    """train.sh on a SAVE_DIR started with other options that shape the run: refused before
    anything is trained."""
    save_dir, before = sact_run["dir"], (sact_run["dir"] / "checkpoint_last.pt").stat().st_mtime_ns
    started = (save_dir / "run_options.txt").read_text().strip()
    assert started.startswith("variant=sact arch=sact_lstm_tiny src=src tgt=tgt seed=1 lr=3e-3 ")
    proc = subprocess.run(
        ["bash", os.path.join(RECIPE, "train.sh"), str(toy_data["bin"]), str(save_dir), variant, *SACT_TRAIN],
        env={**os.environ, "SRC": "src", "TGT": "tgt", "ARCH": "sact_lstm_tiny", "LR": "3e-3", **env},
        text=True,
        capture_output=True,
    )
    assert changed[0] in started
    other = started.replace(*changed)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"train.sh: error: SAVE_DIR {save_dir} was started with '{started}', not '{other}': give another SAVE_DIR"
    ]
    assert (save_dir / "checkpoint_last.pt").stat().st_mtime_ns == before


@pytest.mark.e2e
def test_train_with_validation_bleu_at_the_training_temperature(sact_run):
    log = sact_run["log"]
    assert "SactLSTMModel" in log and "mode=sact, lambda=3" in log
    assert f"validation generator: decoding at training temperature T={T_TRAIN:g}" in log
    assert [r["epoch"] for r in json_log_records(log, "valid") if "valid_bleu" in r] == [1, 2, 3]
    assert (sact_run["dir"] / "checkpoint_best.pt").exists()


@pytest.mark.e2e
def test_the_iwslt_preparation_keeps_its_options(toy_data, tmp_path):
    """prepare_iwslt15_en_vi.sh from a local copy (the toy corpus under IWSLT's file names): run
    again with its options it reuses every step; with other vocabulary sizes it is refused before
    any, since its finished steps would be reused as they are."""
    local = tmp_path / "local"
    local.mkdir()
    for split, name in (("train", "train"), ("valid", "tst2012"), ("test", "tst2013")):
        for side, lang in (("src", "en"), ("tgt", "vi")):
            shutil.copy(toy_data["raw"] / f"{split}.{side}", local / f"{name}.{lang}")
    dest = tmp_path / "data"
    script = os.path.join(RECIPE, "prepare_iwslt15_en_vi.sh")
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], WORKERS="1", NWORDS_TGT="50")

    def prepare(**changed):
        return subprocess.run(
            ["bash", script, dest, local], env={**env, **changed}, text=True, capture_output=True
        )

    assert prepare().returncode == 0
    assert (dest / "prepare_options.txt").read_text() == "NWORDS_SRC=17700 NWORDS_TGT=50\n"
    made = {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()}
    words = (dest / "bin" / "dict.vi.txt").read_text().split()[::2]
    assert len([w for w in words if not w.startswith("madeupword")]) == 50 - 4  # with <s>, <pad>, </s>, <unk>
    again = prepare()
    assert again.returncode == 0 and "ready" in again.stdout
    refused = prepare(NWORDS_TGT="40")
    assert refused.returncode == 2 and refused.stderr.strip().endswith(
        f"DEST {dest} was prepared with 'NWORDS_SRC=17700 NWORDS_TGT=50', not 'NWORDS_SRC=17700 "
        "NWORDS_TGT=40': give another DEST"
    )
    assert {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()} == made


def test_translate_subset_cut_short_leaves_no_output(tmp_path, monkeypatch):
    """OUTPUT that cannot be written whole (the disk fills after its first hypothesis) is removed
    again: evaluate.sh's rerun, which refuses an existing OUTPUT, would be refused for it."""
    script = example_script(os.path.join(REPO, "examples", "sact", "translate_subset.py"))
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "test.src-tgt.src.idx").write_bytes(b"")  # (not read either)
    (tmp_path / "c.pt").write_bytes(b"(not read: the translator is replaced)")

    def hypotheses_then_full_disk():
        yield "a first hypothesis"
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(script.gvb, "load_translator", lambda *args: None)
    monkeypatch.setattr(
        script.gvb, "decode", lambda *args, **kw: SimpleNamespace(hypotheses=hypotheses_then_full_disk())
    )
    output = tmp_path / "test.hyp"
    with pytest.raises(OSError, match="No space left"):
        script.main([str(tmp_path / "bin"), str(tmp_path / "c.pt"), "test", "2", "1", str(output)])
    assert not output.exists()


def test_evaluate_decodes_as_fairseq_generate_then_scores_with_sacrebleu_once(sact_run, toy_data):
    """evaluate.sh: beam 4 through fairseq's Python API at the training temperature -> the hypotheses
    of fairseq-generate itself (the real CLI, which also prints the SACT attention alignments), in
    corpus order -> sacrebleu; a second call redoes nothing; an option the API does not take is
    refused in one line before any decoding."""
    save = sact_run["dir"]
    args = ("evaluate.sh", toy_data["bin"], save, "test", toy_data["raw"] / "test.tgt", "--batch-size", "32")
    bleu, chrf = json.loads(recipe(*args, BEAM="4"))
    assert bleu["name"] == "BLEU" and chrf["name"] == "chrF2" and 0 <= bleu["score"] <= 100
    decoded = json.loads((save / "test.beam4.log").read_text().splitlines()[-1])
    assert (decoded["beam"], decoded["n_sentences"], decoded["decoding_temperature"]) == (4, 80, T_TRAIN)
    generate = run_fairseq(
        "fairseq-generate",
        toy_data["bin"],
        *("--user-dir", PLUGIN_DIR, "--path", save / "checkpoint_best.pt", "--gen-subset", "test"),
        *("-s", "src", "-t", "tgt", "--beam", "4", "--max-len-a", "1.5", "--max-len-b", "10"),
        *("--batch-size", "32", "--cpu", "--print-alignment"),
        env=ONE_THREAD,
    ).stdout
    assert f"decoding at training temperature T={T_TRAIN:g}" in generate
    assert sum(line.startswith("A-") for line in generate.splitlines()) == 80
    hyp = (save / "test.beam4.hyp").read_text().splitlines()
    assert hyp == [hypotheses(generate)[i][1] for i in range(80)]
    stamp = (save / "test.beam4.json").stat().st_mtime_ns
    assert json.loads(recipe(*args, BEAM="4")) == [bleu, chrf]
    assert (save / "test.beam4.json").stat().st_mtime_ns == stamp  # nothing redone
    # ... and not given as the answer to other options (another length penalty, checkpoint, reference)
    made = (save / "test.beam4.options").read_text().strip()
    assert made.startswith("checkpoint=checkpoint_best.pt ") and " lenpen=1.0 " in made
    for env, asked in (
        ({"LENPEN": "2"}, made.replace(" lenpen=1.0 ", " lenpen=2 ")),
        ({"CHECKPOINT": "checkpoint_last.pt"}, made.replace("=checkpoint_best.pt ", "=checkpoint_last.pt ")),
    ):
        proc = recipe_run(*args, BEAM="4", **env)
        assert proc.returncode != 0 and proc.stderr.strip() == (
            f"evaluate.sh: error: {save}/test.beam4.* were made with '{made}', not '{asked}': delete them to "
            "score again, or set BEAM or CHECKPOINT"
        ), proc.stderr
    # a checkpoint trained on since (newer than the outputs): they are not its answer
    best = save / "checkpoint_best.pt"
    times = (best.stat().st_atime_ns, best.stat().st_mtime_ns)  # (restored: the run is the module's)
    os.utime(best, ns=(times[0], (save / "test.beam4.options").stat().st_mtime_ns + 10**9))
    proc = recipe_run(*args, BEAM="4")
    os.utime(best, ns=times)
    assert proc.returncode != 0 and proc.stderr.strip() == (
        f"evaluate.sh: error: {best} is newer than {save}/test.beam4.* (trained on since): delete them to "
        "score it again"
    ), proc.stderr
    assert (save / "test.beam4.json").stat().st_mtime_ns == stamp
    proc = recipe_run(*args, "--print-alignment", BEAM="3")
    assert proc.returncode != 0 and "--print-alignment is not a decoding option" in proc.stderr
    assert not (save / "test.beam3.hyp").exists()


@pytest.mark.e2e
def test_resume_from_checkpoint_gives_the_same_losses_as_an_uninterrupted_run(sact_run, toy_data, tmp_path):
    first = train(toy_data["bin"], tmp_path, 1, in_process=True)  # the recipe's command, in process
    resumed = train(toy_data["bin"], tmp_path, 3, in_process=True)
    assert "Loaded checkpoint" in resumed and "(epoch 2 @" in resumed
    interrupted = json_log_records(first + resumed, "train")
    uninterrupted = json_log_records(sact_run["log"], "train")
    assert [r["epoch"] for r in interrupted] == [r["epoch"] for r in uninterrupted] == [1, 2, 3]
    for a, b in zip(uninterrupted, interrupted):
        for key in ("train_loss", "train_nll_loss", "train_nll_loss_untempered", "train_gnorm"):
            assert a[key] == b[key], (a["epoch"], key)
    for key in ("valid_loss", "valid_bleu"):
        assert [r[key] for r in json_log_records(sact_run["log"], "valid")] == [
            r[key] for r in json_log_records(first + resumed, "valid")
        ]


@pytest.mark.e2e
def test_bad_lambda_fails_before_any_training_step(toy_data, tmp_path):
    proc = run_fairseq(
        "fairseq-train",
        toy_data["bin"],
        "--user-dir",
        PLUGIN_DIR,
        "--arch",
        "sact_lstm_tiny",
        "--sact-lambda",
        "1",
        *TRAIN_DEFAULTS,
        "--max-epoch",
        "1",
        "--save-dir",
        tmp_path,
        check=False,
        env=ONE_THREAD,
    )
    assert proc.returncode != 0
    assert "--sact-lambda must be a finite number > 1" in proc.stdout
    assert "begin training epoch" not in proc.stdout


def run_heatmap_script(*args):
    """ctemp-sact-heatmaps in this process (saves a Python + fairseq start-up)."""
    from fairseq_ctemp.cli import sact_heatmaps

    sact_heatmaps.main([str(a) for a in args])


def test_heatmap_script_refuses_a_checkpoint_of_another_model(toy_checkpoint, toy_data, tmp_path):
    """A plain transformer's checkpoint: one line naming --path and its architecture, nothing written."""
    sentences = tmp_path / "src.txt"
    sentences.write_text((toy_data["raw"] / "test.src").read_text().splitlines()[0] + "\n")
    checkpoint, out = toy_checkpoint("S"), tmp_path / "heatmaps"
    args = [toy_data["bin"], "--path", checkpoint, "--input", sentences, "--out-dir", out]
    with pytest.raises(SystemExit) as refused:
        run_heatmap_script(*args)
    assert str(refused.value) == (
        f"error: --path {checkpoint} is not a sact_lstm or sact_transformer checkpoint (arch transformer)"
    )
    assert not out.exists()


def test_heatmap_script_refuses_output_lengths_below_fairseqs_least(toy_checkpoint, toy_data, tmp_path):
    """Beam search bounds an output by --max-len-a * source length (+ </s>) + --max-len-b, and
    fairseq asserts the bound is at least 1: a bound of 0 for the shortest --input line, counted
    by hand, is refused in one line before the model is loaded; nothing is written."""
    lines = (toy_data["raw"] / "test.src").read_text().splitlines()[:3]
    sentences = tmp_path / "src.txt"
    sentences.write_text("\n".join(lines) + "\n")
    shortest = min(len(line.split()) + 1 for line in lines)
    a = 1 / (shortest + 1)  # a * shortest < 1
    out = tmp_path / "heatmaps"
    args = [toy_data["bin"], "--path", toy_checkpoint("S"), "--input", sentences, "--out-dir", out]
    with pytest.raises(SystemExit) as refused:
        run_heatmap_script(*args, "--max-len-a", a, "--max-len-b", 0)
    assert str(refused.value) == (
        f"error: --max-len-a {a:g} --max-len-b 0 allow at most 0 target tokens for the shortest source "
        f"sentence of --input {sentences} ({shortest} tokens with its </s>), fewer than the shortest "
        "output fairseq allows (--min-len 1): raise --max-len-a or --max-len-b"
    )
    assert not out.exists()


@pytest.mark.e2e
def test_heatmap_script_dumps_tau_and_attention_and_draws_them(sact_run, toy_data, tmp_path, capsys):
    sentences = tmp_path / "src.txt"
    sentences.write_text("\n".join((toy_data["raw"] / "test.src").read_text().splitlines()[:3]) + "\n")
    out = tmp_path / "heatmaps"
    args = [
        toy_data["bin"],
        "--path",
        sact_run["dir"] / "checkpoint_last.pt",
        "--input",
        sentences,
        "--out-dir",
        out,
        "--beam",
        "3",
        "--max-sentences",
        "2",
        "-s",
        "src",
        "-t",
        "tgt",
    ]
    run_heatmap_script(*args)
    dump = json.loads((out / "sact_attention.json").read_text())
    assert len(dump["sentences"]) == 2 and dump["lambda"] == 3.0 and dump["mode"] == "sact"
    for i, sentence in enumerate(dump["sentences"]):
        tau, attention = sentence["tau"], sentence["attention"]
        assert len(tau) == len(sentence["target_tokens"]) == len(attention)
        assert sentence["target_tokens"][-1] == "</s>"
        assert all(1 / 3 < t < 3 for t in tau)
        assert all(
            len(row) == len(sentence["source_tokens"]) and abs(sum(row) - 1) < 1e-4 for row in attention
        )
        assert (out / f"sentence{i + 1}.png").read_bytes()[:4] == b"\x89PNG"
    every = [t for sentence in dump["sentences"] for t in sentence["tau"]]
    (summary,) = dump["tau_summary"]
    assert summary["tokens"] == len(every) and summary["mean"] == pytest.approx(sum(every) / len(every))
    assert (summary["min"], summary["max"]) == (min(every), max(every))
    printed = capsys.readouterr().out
    assert (
        f"wrote {out / 'sact_attention.json'} and 2 PNG heatmaps in {out} (the first 2 of the 3 lines "
        "of --input: --max-sentences)"
        in printed
        and f"tau over the {len(every)} target tokens: mean {summary['mean']:.3f}" in printed
    )
    with pytest.raises(SystemExit, match="sact_attention.json already exists; refusing to overwrite"):
        run_heatmap_script(*args)


def test_heatmaps_source_spm_gives_the_pieces_of_each_line(toy_data, tmp_path):
    """--source-spm: each raw --input line becomes the sentencepiece pieces the model was trained
    on, space-separated (they spell the line again); without it the lines are taken as they are."""
    sentencepiece = pytest.importorskip("sentencepiece")
    from fairseq_ctemp.sact_analysis import encoded

    lines = (toy_data["raw"] / "train.src").read_text().splitlines()
    sentencepiece.SentencePieceTrainer.train(
        input=str(toy_data["raw"] / "train.src"),
        model_prefix=str(tmp_path / "spm"),
        vocab_size=100,
        minloglevel=2,
    )
    pieces = encoded(lines[:20], str(tmp_path / "spm.model"))
    assert len(pieces) == 20
    # 100 pieces for 150 words: some words are split
    assert sum(len(e.split()) for e in pieces) > sum(len(line.split()) for line in lines[:20])
    for line, encoded_line in zip(lines, pieces):
        assert encoded_line.replace(" ", "").replace("\u2581", " ").strip() == line
    assert encoded(lines[:3], None) == lines[:3]


def test_heatmaps_interrupted_while_drawing_leave_nothing_behind(tmp_path):
    """Stopped while drawing (Ctrl-C at the second PNG): the dump and the PNG written are removed
    again, so that the rerun into the same --out-dir is not refused for them."""
    from fairseq_ctemp.cli.sact_heatmaps import write_outputs

    out = tmp_path / "maps"
    pngs = [str(out / f"sentence{i}.png") for i in (1, 2, 3)]

    def draw_one(i, path):
        if i == 1:
            raise KeyboardInterrupt
        with open(path, "wb") as f:
            f.write(b"png")

    with pytest.raises(KeyboardInterrupt):
        write_outputs(str(out), str(out / "sact_attention.json"), {"sentences": []}, pngs, draw_one)
    assert os.listdir(out) == []
