"""Softmax tempering for training (Dabre and Fujita, "Investigating Softmax Tempering for Training
Neural Machine Translation Models", MT Summit 2021): cross-entropy of softmax(logits / T),
label-smoothed, optionally mixed with softmax entropy maximisation (SEM), and multiplied by T.

    P      = softmax(D / T)
    L_X    = fairseq's label-smoothed NLL of P (gold 1 - eps, others eps / (V - 1))
    L_NSE  = sum_v P_v log P_v                         (negative entropy; minimising it maximises H(P))
    loss   = T * ((1 - w) * L_X + w * L_NSE)           (the factor T can be switched off)

At T = 1, w = 0 this is exactly fairseq's ``label_smoothed_cross_entropy``: the same operations
forward, and the same gradient, made in fewer passes (smoothed_nll.py).
The temperature is stored in the checkpoint's criterion config, and ``fairseq_ctemp.decoding`` makes
every fairseq decoding path use it.
"""

import math
from dataclasses import dataclass, field

import torch
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
    label_smoothed_nll_loss,
)

from .. import decoding
from ..errors import OptionError
from . import checks
from .chunked_loss import chunked_tempered_loss, scaled_product
from .host_values import host_floats
from .smoothed_nll import label_smoothed_nll_loss_sum
from .tempered_diagnostics import Rows, diagnostics


@dataclass
class TemperedCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    softmax_temperature: float = field(
        default=1.0,
        metadata={
            "help": "T > 0: train on softmax(logits / T); checkpoints then decode at this T. "
            "The paper's best values on ALT are 3-5"
        },
    )
    sem_weight: float = field(
        default=0.0,
        metadata={
            "help": "weight w in [0, 1) of softmax-entropy maximisation: "
            "loss = T * ((1 - w) * label-smoothed CE + w * sum_v P_v log P_v)"
        },
    )
    no_temperature_rescale: bool = field(
        default=False,
        metadata={"help": "do not multiply the loss by T (ablation of the paper's Eq. 2 re-scaling)"},
    )
    loss_chunk_tokens: int = field(
        default=0,
        metadata={
            "help": "N > 0: compute the output projection and the loss N target tokens at a time, "
            "never holding the batch x vocabulary logits (less memory; the same loss and gradients "
            "up to rounding). 0: fairseq's path"
        },
    )


class TemperedLogSoftmax(torch.autograd.Function):
    """log_softmax(x / T) of fp32 x with one fp32 tensor forward and one backward, like
    F.log_softmax(x) itself: autograd through ``x / T`` would allocate a second batch x vocab tensor
    each way (measured: ~8% of a training step and +18% peak memory on CPU). in_place: x is our own
    copy (tempered_log_softmax), overwritten."""

    @staticmethod
    def forward(ctx, x, temperature, in_place):
        if in_place:
            ctx.mark_dirty(x)
        out = x.div_(temperature) if in_place else x.div(temperature)
        torch._log_softmax(out, -1, False, out=out)  # row-wise, in place on our own copy
        ctx.temperature = temperature
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return torch._log_softmax_backward_data(grad, out, -1, out.dtype).div_(ctx.temperature), None, None


def tempered_log_softmax(logits, temperature):
    """log_softmax(logits / T) in fp32, whatever the logits' precision. Half-precision logits are
    cast first, outside the function, as fairseq's log_softmax(x.float()) does: the cast back of
    the gradient then runs after the function's backward has freed its tensors (cast inside, the
    backward held a half-precision batch x vocab tensor more: +10% of a step's peak on a GPU)."""
    if logits.dtype == torch.float32:
        return TemperedLogSoftmax.apply(logits, temperature, False)
    return TemperedLogSoftmax.apply(logits.float(), temperature, True)


class NegativeEntropy(torch.autograd.Function):
    """sum_v p_v log p_v of each row of log-probabilities lp; saves only lp (which the log-softmax
    keeps anyway) and recomputes p in backward: d/d lp = p * (1 + lp)."""

    @staticmethod
    def forward(ctx, lp):
        ctx.save_for_backward(lp)
        return torch.exp(lp).mul_(lp).sum(dim=-1, keepdim=True)

    @staticmethod
    def backward(ctx, grad):
        (lp,) = ctx.saved_tensors
        p = torch.exp(lp)
        return p.addcmul_(p, lp).mul_(grad)


def tempered_label_smoothed_nll_loss(
    lprobs, target, epsilon, temperature, sem_weight=0.0, ignore_index=None, reduce=True, rescale=True
):
    """Loss of the module docstring, from ``lprobs`` = log softmax(D / T) (already tempered).

    Returns (loss, nll_loss, neg_entropy); nll_loss = -log P_y of the tempered distribution and
    neg_entropy = sum_v P_v log P_v (None when ``sem_weight`` is 0: it is then not needed for the
    gradient). Padding positions (target == ignore_index) contribute 0 to all three.
    """
    if reduce:  # the same numbers, its backward one pass over lprobs' gradient instead of three
        loss, nll_loss = label_smoothed_nll_loss_sum(lprobs, target, epsilon, ignore_index)
    else:
        loss, nll_loss = label_smoothed_nll_loss(lprobs, target, epsilon, ignore_index, reduce=False)
    neg_entropy = None
    if sem_weight > 0:
        neg_entropy = NegativeEntropy.apply(lprobs)
        if ignore_index is not None:
            neg_entropy = neg_entropy.masked_fill(target.unsqueeze(-1).eq(ignore_index), 0.0)
        else:
            neg_entropy = neg_entropy.squeeze(-1)
        if reduce:
            neg_entropy = neg_entropy.sum()
        loss = (1.0 - sem_weight) * loss + sem_weight * neg_entropy
    if rescale:
        loss = loss * temperature
    return loss, nll_loss, neg_entropy


def check_options(softmax_temperature, label_smoothing, sem_weight, loss_chunk_tokens=0):
    """One clear error per bad option, raised when the criterion is built (before any step)."""
    checks.check_temperature("--softmax-temperature", softmax_temperature)
    if loss_chunk_tokens < 0:
        raise OptionError(f"--loss-chunk-tokens must be >= 0 (0: off), got {loss_chunk_tokens}")
    if not 0.0 <= label_smoothing < 1.0:
        raise OptionError(f"--label-smoothing must be in [0, 1), got {label_smoothing}")
    if not 0.0 <= sem_weight < 1.0:  # at 1 the cross-entropy has no weight: the target is ignored
        raise OptionError(
            f"--sem-weight must be in [0, 1), got {sem_weight} (at 1 the loss is the entropy alone: "
            "the most uniform model would be the best)"
        )


@register_criterion("tempered_ce", dataclass=TemperedCrossEntropyConfig)
class TemperedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(
        self,
        task,
        sentence_avg,
        label_smoothing,
        softmax_temperature=1.0,
        sem_weight=0.0,
        no_temperature_rescale=False,
        loss_chunk_tokens=0,
        ignore_prefix_size=0,
        report_accuracy=False,
    ):
        check_options(softmax_temperature, label_smoothing, sem_weight, loss_chunk_tokens)
        super().__init__(
            task,
            sentence_avg,
            label_smoothing,
            ignore_prefix_size=ignore_prefix_size,
            report_accuracy=report_accuracy,
        )
        self.temperature = float(softmax_temperature)
        self.sem_weight = float(sem_weight)
        self.rescale = not no_temperature_rescale
        self.chunk = int(loss_chunk_tokens)
        # --eval-bleu's generator was built with the model, before this criterion existed.
        decoding.use_training_temperature_for_validation(task, self.temperature)

    @classmethod
    def build_criterion(cls, cfg, task):
        model = checks.model_options(cfg)  # now, not in the first step (which would leave crash.pt)
        if checks.builds_temperature_head(model):
            raise OptionError(TEMPERATURE_HEAD)
        if checks.builds_adaptive_softmax(model):
            raise OptionError(ADAPTIVE_SOFTMAX)
        if checks.option(cfg, "loss_chunk_tokens") and model is not None:
            if not checks.projects_with_one_linear_layer(model):
                raise OptionError(NO_OUTPUT_PROJECTION.format(arch=checks.option(model, "arch")))
        return super().build_criterion(cfg, task)

    def forward(self, model, sample, reduce=True):
        # Every step, not once: a hook put on the output projection later must not be skipped.
        check_model_output(model)
        if self.chunk and reduce:
            return self._chunked_forward(model, sample)
        projection = plain_output_projection(model)
        if projection is not None and self.temperature != 1.0 and reduce:
            return self._projected_forward(model, sample, projection)
        net_output = model(**sample["net_input"])
        loss, nll_loss, lprobs, target = self._loss_and_lprobs(model, net_output, sample, reduce)
        logging_output = self._logging_output(sample, loss, nll_loss)
        logits = net_output[0]
        if self.ignore_prefix_size > 0:
            logits = logits[:, self.ignore_prefix_size :, :]
        rows = Rows.of_logits(logits.reshape(-1, logits.size(-1)), lprobs)
        logging_output.update(diagnostics(rows, target, self.padding_idx, self.temperature, self.training))
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"] = n_correct.data
            logging_output["total"] = total.data
        return loss, logging_output["sample_size"], logging_output

    def _features(self, model, sample):
        """The decoder's features, one row per target position, and the targets (the output layer
        left to the criterion)."""
        features = model(**sample["net_input"], features_only=True)[0]
        target = model.get_targets(sample, None)
        if self.ignore_prefix_size > 0:
            features = features[:, self.ignore_prefix_size :, :]
            target = target[:, self.ignore_prefix_size :]
        return features.reshape(-1, features.size(-1)), target.reshape(-1)

    def _projected_forward(self, model, sample, projection):
        """forward at T != 1 for a decoder that ends in one linear projection: the logits / T come
        out of the projection's matrix product (scaled_linear), and the log-softmax is fairseq's own
        (fused with the cast to float32 and, in backward, with the cast back). Dividing the model's
        logits instead costs four more passes over the batch x vocabulary tensor (a cast, a division
        each way, a cast back): +18% of a transformer base step's kernel time on an H200."""
        h, target = self._features(model, sample)
        scaled = scaled_linear(h, projection, 1.0 / self.temperature)
        lprobs = utils.log_softmax(scaled, dim=-1)
        loss, nll_loss, _ = tempered_label_smoothed_nll_loss(
            lprobs, target, self.eps, self.temperature, self.sem_weight,
            ignore_index=self.padding_idx, rescale=self.rescale,
        )  # fmt: skip
        logging_output = self._logging_output(sample, loss, nll_loss)
        rows = Rows.of_scaled_logits(scaled.detach(), self.temperature, lprobs.detach())
        logging_output.update(diagnostics(rows, target, self.padding_idx, self.temperature, self.training))
        if self.report_accuracy:
            keep = target.ne(self.padding_idx)
            logging_output["n_correct"] = lprobs.detach().argmax(-1).eq(target).logical_and_(keep).sum()
            logging_output["total"] = keep.sum()
        return loss, logging_output["sample_size"], logging_output

    def _chunked_forward(self, model, sample):
        """forward with --loss-chunk-tokens: the decoder's features, then chunked_loss."""
        projection = output_projection(model)  # refuses a projection that runs more, before the model runs
        h, target = self._features(model, sample)
        keep = target.ne(self.padding_idx)
        loss, sums = chunked_tempered_loss(
            h, projection.weight, projection.bias, target, keep, self.temperature, self.eps,
            self.sem_weight, self.rescale, self.chunk, count_correct=self.report_accuracy,
        )  # fmt: skip
        logging_output = self._logging_output(sample, loss, sums.nll)
        rows = Rows.of_features(h.detach(), projection, self.temperature)
        logging_output.update(diagnostics(rows, target, self.padding_idx, self.temperature, self.training))
        if self.report_accuracy:
            logging_output["n_correct"], logging_output["total"] = sums.correct, keep.sum()
        return loss, logging_output["sample_size"], logging_output

    def _logging_output(self, sample, loss, nll_loss):
        return {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample["target"].size(0) if self.sentence_avg else sample["ntokens"],
        }

    def get_lprobs_and_target(self, model, net_output, sample):
        if self.temperature == 1.0:  # exactly fairseq's label_smoothed_cross_entropy
            return super().get_lprobs_and_target(model, net_output, sample)
        # The model's get_normalized_probs is log_softmax(net_output[0]) for every output layer we
        # accept (check_model_output refuses adaptive softmax); this is the same at temperature T.
        lprobs = tempered_log_softmax(net_output[0], self.temperature)
        target = model.get_targets(sample, net_output)
        if self.ignore_prefix_size > 0:
            lprobs = lprobs[:, self.ignore_prefix_size :, :].contiguous()
            target = target[:, self.ignore_prefix_size :].contiguous()
        return lprobs.view(-1, lprobs.size(-1)), target.view(-1)

    def compute_loss(self, model, net_output, sample, reduce=True):
        loss, nll_loss, _, _ = self._loss_and_lprobs(model, net_output, sample, reduce)
        return loss, nll_loss

    def _loss_and_lprobs(self, model, net_output, sample, reduce):
        lprobs, target = self.get_lprobs_and_target(model, net_output, sample)
        loss, nll_loss, _ = tempered_label_smoothed_nll_loss(
            lprobs,
            target,
            self.eps,
            self.temperature,
            self.sem_weight,
            ignore_index=self.padding_idx,
            reduce=reduce,
            rescale=self.rescale,
        )
        return loss, nll_loss, lprobs, target

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        ntokens = sum(log.get("ntokens", 0) for log in logging_outputs)
        if ntokens == 0:
            return
        # Base 2 like fairseq's loss / nll_loss, so ppl_untempered = 2 ** nll_loss_untempered.
        keys = ("nll_loss_untempered", "entropy", "entropy_untempered")
        totals = host_floats([sum(log.get(key, 0) for log in logging_outputs) for key in keys])
        for key, total in zip(keys, totals):
            metrics.log_scalar(key, total / ntokens / math.log(2), ntokens, round=3)
        metrics.log_derived(
            "ppl_untempered", lambda meters: utils.get_perplexity(meters["nll_loss_untempered"].avg)
        )


def output_projection(model):
    """The decoder's output layer, if it is one linear projection of its features (fairseq's
    transformer and transformer_lm): what --loss-chunk-tokens multiplies chunk by chunk."""
    projection = getattr(getattr(model, "decoder", model), "output_projection", None)
    if not isinstance(projection, torch.nn.Linear):
        raise OptionError(NO_OUTPUT_PROJECTION.format(arch=type(model).__name__))
    if runs_more_than_its_product(projection):
        raise OptionError(HOOKED_OUTPUT_PROJECTION)
    return projection


def runs_more_than_its_product(linear):
    """Whether calling the linear layer runs more than x W^T + b: hooks of its own (quant noise,
    weight norm) or global ones, or a forward other than nn.Linear's (a subclass's, one set on the
    instance): a product with its weight alone would silently skip them."""
    from torch.nn.modules import module as base

    hooks = linear._forward_hooks or linear._forward_pre_hooks
    global_hooks = base._global_forward_hooks or base._global_forward_pre_hooks
    own_forward = type(linear).forward is not torch.nn.Linear.forward or "forward" in vars(linear)
    return bool(hooks or global_hooks or own_forward)


def plain_output_projection(model):
    """The decoder's output projection when its forward and output layer are fairseq's transformer
    ones, without an adaptive softmax, and calling it runs nothing but its forward (its logits are
    exactly this linear layer of the features it returns with features_only=True); else None."""
    from fairseq.models.transformer.transformer_decoder import TransformerDecoderBase as Base

    decoder = getattr(model, "decoder", model)
    projection = getattr(decoder, "output_projection", None)
    plain = type(decoder).output_layer is Base.output_layer and type(decoder).forward is Base.forward
    if plain and isinstance(projection, torch.nn.Linear) and decoder.adaptive_softmax is None:
        return None if runs_more_than_its_product(projection) else projection
    return None


def scaled_linear(x, linear, scale):
    """linear(x) * scale, the scale applied by the matrix product itself (chunked_loss's
    scaled_product: BLAS's alpha, no pass of its own over the output)."""
    bias = None if linear.bias is None else linear.bias * scale
    return scaled_product(x, linear.weight, bias, scale)


def check_model_output(model):
    """tempered_ce divides the logits returned in net_output[0]; an adaptive softmax returns features
    there and normalises them itself, so tempering would silently do the wrong thing."""
    decoder = getattr(model, "decoder", model)
    if getattr(decoder, "output_head", None) is not None:
        raise OptionError(TEMPERATURE_HEAD)
    if getattr(decoder, "adaptive_softmax", None) is not None:
        raise OptionError(ADAPTIVE_SOFTMAX)


TEMPERATURE_HEAD = (
    "--criterion tempered_ce needs a model whose net_output[0] are logits; this model has a "
    "temperature head (ct_transformer, ct_transformer_lm, ct_lstm_lm): use --criterion "
    "ct_cross_entropy (--ct-normalization constant --ct-constant T is a fixed temperature T)"
)
NO_OUTPUT_PROJECTION = (
    "--loss-chunk-tokens needs a decoder whose output layer is one linear projection "
    "(decoder.output_projection: fairseq's transformer and transformer_lm families); {arch} has "
    "none: use --loss-chunk-tokens 0"
)
HOOKED_OUTPUT_PROJECTION = (
    "--loss-chunk-tokens multiplies the features by decoder.output_projection's weight itself, and "
    "this model's output projection runs more when called (forward hooks: quant noise, weight norm, "
    "...; or a forward of its own) that it would skip: use --loss-chunk-tokens 0"
)
ADAPTIVE_SOFTMAX = (
    "--criterion tempered_ce needs a full softmax output layer; this model has an adaptive "
    "softmax (--adaptive-softmax-cutoff). Train without --adaptive-softmax-cutoff, or use "
    "the contextual-temperature LM heads of fairseq_ctemp for adaptive softmax."
)
