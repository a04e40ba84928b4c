"""Options of fairseq's Transformer that fairseq only asserts deep in the build (a traceback), as
errors naming the options, for the plugin's Transformer translators and language models."""

from ..errors import OptionError


def check_attention_heads(args, sides=("encoder", "decoder")):
    """Each side's embedding splits evenly over its attention heads."""
    for side in sides:
        dim, heads = getattr(args, f"{side}_embed_dim"), getattr(args, f"{side}_attention_heads")
        if heads < 1 or dim % heads:
            raise OptionError(
                f"--{side}-embed-dim {dim} must be a multiple of --{side}-attention-heads {heads} "
                "(an integer >= 1): each head attends over embed-dim / heads dimensions"
            )


def check_shared_embeddings(args, task):
    """--share-all-embeddings: one dictionary and one embedding size for both languages."""
    if not args.share_all_embeddings:
        return
    src, tgt = task.source_dictionary, task.target_dictionary
    if src != tgt:
        raise OptionError(
            f"--share-all-embeddings needs one dictionary for both languages (fairseq-preprocess "
            f"--joined-dictionary); got {len(src)} source and {len(tgt)} target entries"
        )
    if args.encoder_embed_dim != args.decoder_embed_dim:
        raise OptionError(
            f"--share-all-embeddings needs --encoder-embed-dim ({args.encoder_embed_dim}) equal to "
            f"--decoder-embed-dim ({args.decoder_embed_dim})"
        )
