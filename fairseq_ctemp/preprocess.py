"""fairseq-preprocess in this process, for tools that have fairseq imported already (no second
start of Python, torch and fairseq): the ALT data preparation and the quickstart."""

import logging


def fairseq_preprocess(argv):
    """fairseq-preprocess ARGV; its log goes to DESTDIR/preprocess.log only."""
    from fairseq import options
    from fairseq_cli import preprocess

    logger = logging.getLogger(preprocess.logger.name)
    kept = logger.handlers[:], logger.propagate, logger.level
    logger.propagate = False  # not on the caller's console: into preprocess.log (main adds it)
    logger.setLevel(logging.INFO)  # what fairseq-preprocess logs
    try:
        preprocess.main(options.get_preprocessing_parser().parse_args(argv))
    finally:
        for handler in logger.handlers[len(kept[0]) :]:
            handler.close()
        logger.handlers[:], logger.propagate = kept[:2]
        logger.setLevel(kept[2])
