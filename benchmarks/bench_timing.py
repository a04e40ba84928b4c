"""The timed rounds of the benchmarks that compare several models: each model trains (or decodes)
the same batches in every round, in an order rotated from round to round; the random sources they
decode."""

import statistics
import time

import numpy as np
import torch


def random_sources(args, dictionary, n):
    rng = np.random.default_rng(args.seed + 1)
    lengths = sorted(rng.integers(args.lengths[0], args.lengths[1] + 1, n), reverse=True)
    return [
        torch.from_numpy(
            np.append(rng.integers(dictionary.nspecial, len(dictionary), k - 1), dictionary.eos())
        )
        for k in lengths
    ]


def generation_batches(args, dictionary, device):
    """Batches of random sources, left-padded and sorted by length as fairseq collates them."""
    from fairseq.data import data_utils

    sources = random_sources(args, dictionary, args.gen_sentences)
    batches = []
    for i in range(0, len(sources), args.gen_batch_size):
        chunk = sources[i : i + args.gen_batch_size]
        tokens = data_utils.collate_tokens(chunk, dictionary.pad(), left_pad=True)
        batches.append(
            {
                "net_input": {
                    "src_tokens": tokens.to(device),
                    "src_lengths": torch.tensor([len(s) for s in chunk]).to(device),
                }
            }
        )
    return batches


def rotations(names, rounds):
    """Each round's model order: rotated from round to round, so no model always goes first."""
    return [names[r % len(names) :] + names[: r % len(names)] for r in range(rounds)]


def time_training(trainers, batches, words, args, sync, before=lambda name: None):
    """Training words/s of every {name: Trainer}, wall and CPU time, per round after the warm-up
    ones; before(name) is called first (a benchmark that swaps one trainer's criterion)."""
    names = list(trainers)
    wall, cpu = {n: [] for n in names}, {n: [] for n in names}
    for r, order in enumerate(rotations(names, args.warmup + args.rounds)):
        for name in order:
            before(name)
            sync()
            start, cpu_start = time.perf_counter(), time.process_time()
            for sample in batches:
                trainers[name].train_step([sample])
            sync()
            if r >= args.warmup:
                wall[name].append(words / (time.perf_counter() - start))
                cpu[name].append(words / (time.process_time() - cpu_start))
    return wall, cpu


def beam_generators(trainers, task, args):
    """{name: fairseq's SequenceGenerator} of every model: beam args.beam, exactly args.gen_len
    steps for every sentence so that every model does the same work, set up as fairseq-generate."""
    from fairseq.sequence_generator import SequenceGenerator

    generators = {}
    for name, trainer in trainers.items():
        model = trainer.model
        model.make_generation_fast_(need_attn=False)  # as fairseq-generate without --print-alignment
        model.eval()
        generators[name] = SequenceGenerator(
            [model],
            task.target_dictionary,
            beam_size=args.beam,
            max_len_a=0,
            max_len_b=args.gen_len,
            min_len=args.gen_len,
        )
    return generators


def time_beam_search(generators, gen_batches, args, sync):
    """Beam-search sentences/s of every {name: beam_generators' generator}, wall and CPU."""
    names = list(generators)
    wall, cpu, steps = {n: [] for n in names}, {n: [] for n in names}, {}
    with torch.no_grad():
        for r, order in enumerate(rotations(names, args.warmup + args.rounds)):
            for name in order:
                sync()
                start, cpu_start = time.perf_counter(), time.process_time()
                outputs = [generators[name].forward(b) for b in gen_batches]
                sync()
                if r >= args.warmup:
                    wall[name].append(args.gen_sentences / (time.perf_counter() - start))
                    cpu[name].append(args.gen_sentences / (time.process_time() - cpu_start))
                steps[name] = {len(h[0]["tokens"]) for out in outputs for h in out}
    assert all(s == {args.gen_len + 1} for s in steps.values()), steps  # same work for every model
    return wall, cpu


def print_speeds(names, train, gen, beam, width):
    """The table of training words/s and beam sentences/s: median [min .. max] and per CPU-second."""
    med = statistics.median
    print(
        f"\n{'':{width}} {'train words/s median [min .. max]':>34} {'words/CPU-s':>11}   "
        f"{f'beam-{beam} sentences/s [min .. max]':>33} {'sent/CPU-s':>10}"
    )
    for name in names:
        w, g = train[0][name], gen[0][name]
        print(
            f"{name:{width}} {med(w):12.0f} [{min(w):8.0f} .. {max(w):8.0f}] {med(train[1][name]):11.0f}   "
            f"{med(g):12.2f} [{min(g):7.2f} .. {max(g):7.2f}] {med(gen[1][name]):10.2f}"
        )
