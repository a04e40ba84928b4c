"""The ALT models' settings: the one source of the sweep's defaults (``ctemp-alt-sweep run --preset``).

Each preset: "about" (one line for --help), "train" (fairseq-train options of everything but the
criterion, the data and the schedule of validations: architecture, dropout, optimizer, learning rate,
batch), and the sweep's defaults: "interval" (validate and save every N updates), "patience",
"average" (checkpoints of the last N validations averaged), "max_update" (None: no cap),
"log_interval", "temperatures", "grid_beams" / "grid_lenpens" (finalize's dev grid), "eval_beam",
"speed_beams", "decode_batch", "threads" (per run on CPU; None: torch's default).
"""

PAPER_T = [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 3.0, 4.0, 5.0, 10.0]


PAPER_BEAMS = [2, 4, 6, 8, 10, 12]


PAPER_LENPENS = [0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]

OPTIMIZER = [
    "--optimizer",
    "adam",
    "--adam-betas",
    "(0.9,0.98)",
    "--clip-norm",
    "0.0",
    "--lr-scheduler",
    "inverse_sqrt",
]


# Everything but the architecture, the batch and the learning rate; shared by the presets.
PRESETS = {
    "base": {
        "about": "Transformer base (6+6 layers, 512/2048, 8 heads; the paper's model), GPU",
        "train": [
            "--arch",
            "transformer",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.1",
            "--attention-dropout",
            "0.1",
            "--activation-dropout",
            "0.1",
            *OPTIMIZER,
            "--lr",
            "5e-4",
            "--warmup-updates",
            "4000",
            "--max-tokens",
            "4096",
        ],
        "interval": 1000,
        "patience": 10,
        "average": 10,
        "max_update": None,
        "log_interval": 100,
        "temperatures": PAPER_T,
        "grid_beams": PAPER_BEAMS,
        "grid_lenpens": PAPER_LENPENS,
        "eval_beam": 4,
        "speed_beams": [4, 10],
        "decode_batch": 128,
        "threads": None,
    },
    "small": {
        "about": "fairseq's transformer_iwslt_de_en (6+6 layers, 512/1024, 4 heads), dropout 0.3, GPU",
        "train": [
            "--arch",
            "transformer_iwslt_de_en",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.3",
            "--weight-decay",
            "0.0001",
            *OPTIMIZER,
            "--lr",
            "5e-4",
            "--warmup-updates",
            "4000",
            "--max-tokens",
            "4096",
        ],
        "interval": 1000,
        "patience": 10,
        "average": 10,
        "max_update": None,
        "log_interval": 100,
        "temperatures": PAPER_T,
        "grid_beams": PAPER_BEAMS,
        "grid_lenpens": PAPER_LENPENS,
        "eval_beam": 4,
        "speed_beams": [4, 10],
        "decode_batch": 128,
        "threads": None,
    },
    "mini": {
        "about": "CPU: 2+2 layers, 128/512, 4 heads, one thread per run, capped updates "
        "(on a 2-core CPU use it with small data, e.g. --vocab 2000 --train-subset 4000)",
        "train": [
            "--arch",
            "transformer",
            "--encoder-layers",
            "2",
            "--decoder-layers",
            "2",
            "--encoder-embed-dim",
            "128",
            "--decoder-embed-dim",
            "128",
            "--encoder-ffn-embed-dim",
            "512",
            "--decoder-ffn-embed-dim",
            "512",
            "--encoder-attention-heads",
            "4",
            "--decoder-attention-heads",
            "4",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.1",
            *OPTIMIZER,
            # a short warm-up and about half the Noam peak for d=128 (d^-0.5 * 200^-0.5 = 6e-3):
            # at 1e-3 the small-data runs were still far from early stopping after 900 updates
            "--lr",
            "3e-3",
            "--warmup-updates",
            "200",
            "--max-tokens",
            "2048",
            # greedy validation BLEU in batches of ~200 sentences: with the training batch
            # (~45) validating took as long as 100 updates on one thread
            "--max-tokens-valid",
            "8192",
            "--num-workers",
            "0",
        ],
        "interval": 100,
        "patience": 10,
        "average": 5,
        "max_update": 8000,
        "log_interval": 20,
        "temperatures": [1.0, 2.0, 3.0, 4.0, 5.0],
        "grid_beams": [2, 4, 6],
        "grid_lenpens": [0.6, 1.0, 1.4],
        "eval_beam": 4,
        "speed_beams": [4, 10],
        "decode_batch": 200,
        "threads": 1,
    },
}


MAX_LEN = ["--max-len-a", "2", "--max-len-b", "20"]  # bounds babbling of early/poor models (covers ALT)
