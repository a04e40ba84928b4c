"""fairseq's adaptive input, usable under autocast (--amp).

fairseq's ``AdaptiveInput.forward`` writes each band's rows, made by an embedding and a linear
projection, into a float32 tensor by index assignment; under autocast the projection returns half
precision rows and the assignment fails ("Index put requires the source and destination dtypes
match"). ``AutocastAdaptiveInput`` writes them in the result's dtype; everything else, the
parameters and their names included, is fairseq's. Used by ``ct_transformer_lm`` only: fairseq's own
models keep fairseq's module."""

from fairseq.modules import AdaptiveInput


class AutocastAdaptiveInput(AdaptiveInput):
    def forward(self, input):
        result = self._float_tensor.new(input.shape + (self.embedding_dim,))
        for i in range(len(self.cutoff)):
            mask = input.lt(self.cutoff[i])
            if i > 0:
                mask.mul_(input.ge(self.cutoff[i - 1]))
                chunk_input = input[mask] - self.cutoff[i - 1]
            else:
                chunk_input = input[mask]
            if mask.any():
                result[mask] = self.embeddings[i](chunk_input).to(result.dtype)
        return result


def autocast_safe(embed_tokens):
    """embed_tokens, an AdaptiveInput made an AutocastAdaptiveInput in place (its class alone)."""
    if type(embed_tokens) is AdaptiveInput:
        embed_tokens.__class__ = AutocastAdaptiveInput
    return embed_tokens
