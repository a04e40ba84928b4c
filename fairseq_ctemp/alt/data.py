"""ALT data for the softmax-tempering recipes (ctemp-alt-data): the official train/dev/test split of
any language pair from the release or a local copy, normalised, checked, subword-segmented and
binarised for fairseq; every step written under a temporary name and never overwritten. The layout
and the checks: ctemp-alt-data --help."""

import dataclasses
import os
import random
import shlex
import shutil

from .. import optional
from ..option_errors import missing_directories, remove_empty
from ..outputs import write_json
from ..preprocess import fairseq_preprocess
from ..progress import progress_bar
from ..toy_data import ToyLanguagePair
from .common import (
    FAIRSEQ_SUBSET,
    OFFICIAL_SIZES,
    SPLITS,
    AltError,
    Lock,
    data_dir,
    data_tag,
    direction,
    fresh_dir,
    pair,
    read_json,
    remove_bpe_of,
    say,
)
from .overlap import in_train, in_train_line
from .records import CorpusStats, DataOptions, Prepared
from .sources import corpus_source


def step(path, what):
    """Run `what(tmp)` unless `path` exists; the result appears at `path` only when complete."""
    if os.path.exists(path):
        say(f"  {os.path.basename(path)}/ exists: skipped")
        return False
    tmp = fresh_dir(path + ".tmp")
    try:
        what(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # no half-made step is left behind
        raise
    os.replace(tmp, path)
    return True


def raw_texts(splits, a, b):
    """{file name in raw/: its text} of the split pairs."""
    return {
        f"{split}.{lang}": "".join(p[index] + "\n" for p in pairs)
        for split, pairs in splits.items()
        for index, lang in enumerate((a, b))
    }


def write_raw(tmp, texts):
    for name, text in texts.items():
        with open(os.path.join(tmp, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def check_same_corpus(raw, texts, source, dest):
    """A prepared raw/ must be what the corpus gives now: anything else (another corpus, another
    version of it) would mix two corpora in one data directory."""
    have = sorted(n for n in os.listdir(raw) if n != "stats.json")
    for name in sorted(set(have) | set(texts)):
        path = os.path.join(raw, name)
        same = os.path.isfile(path) and name in texts
        if same:
            with open(path, encoding="utf-8", newline="") as f:
                same = f.read() == texts[name]
        if not same:
            raise AltError(
                f"{dest} was prepared from another corpus than {source.describe()['path']} "
                f"(its raw/{name} differs from what that corpus gives): use another --work, "
                "or the corpus it was prepared from"
            )


def train_spm(tmp, raw, langs, vocab, model_type, threads):
    import sentencepiece as spm

    for lang in langs:
        path = os.path.join(raw, f"train.{lang}")
        try:
            spm.SentencePieceTrainer.train(
                input=path,
                model_prefix=os.path.join(tmp, f"spm.{lang}"),
                vocab_size=vocab,
                model_type=model_type,
                character_coverage=0.9995 if lang in ("ja", "zh") else 1.0,
                num_threads=threads,
                minloglevel=2,
                seed_sentencepiece_size=1000000,
                input_sentence_size=2000000,
                shuffle_input_sentence=True,
            )
        except RuntimeError as e:
            # too few pieces for the text's characters, or more than its text allows
            larger = "smaller than required_chars" in str(e)
            raise AltError(
                f"sentencepiece could not learn {vocab} pieces from {path}: {e} "
                f"(choose a {'larger' if larger else 'smaller'} --vocab)"
            ) from None


def train_bpe(tmp, raw, langs, vocab):
    from subword_nmt.learn_bpe import learn_bpe

    for lang in langs:
        with open(os.path.join(raw, f"train.{lang}"), encoding="utf-8") as f, open(
            os.path.join(tmp, f"bpe.{lang}.codes"), "w", encoding="utf-8"
        ) as out:
            learn_bpe(f, out, vocab)


def encode(tmp, raw, sub, langs, subwords):
    for lang in langs:
        if subwords == "spm":
            import sentencepiece as spm

            model = spm.SentencePieceProcessor(model_file=os.path.join(sub, f"spm.{lang}.model"))
            segment = lambda line, model=model: " ".join(model.encode(line, out_type=str))  # noqa: E731
        else:
            from subword_nmt.apply_bpe import BPE

            with open(os.path.join(sub, f"bpe.{lang}.codes"), encoding="utf-8") as codes:
                bpe = BPE(codes)
            segment = bpe.process_line
        for split in SPLITS:
            path = os.path.join(raw, f"{split}.{lang}")
            if not os.path.exists(path):
                continue
            with open(path, encoding="utf-8") as f, open(
                os.path.join(tmp, f"{split}.{lang}"), "w", encoding="utf-8", newline="\n"
            ) as out:
                for line in f:
                    out.write(segment(line.rstrip("\n")).strip() + "\n")


def binarise(tmp, tok, a, b, has_test, workers):
    argv = [
        "--source-lang",
        a,
        "--target-lang",
        b,
        "--trainpref",
        os.path.join(tok, "train"),
        "--validpref",
        os.path.join(tok, "dev"),
        "--destdir",
        tmp,
        "--workers",
        str(workers),
    ]
    argv += ["--testpref", os.path.join(tok, "test")] if has_test else []
    try:
        fairseq_preprocess(argv)
    except Exception as e:
        raise AltError(f"fairseq-preprocess {shlex.join(argv)} failed: {e}") from None


def corpus_splits(source, a, b, args):
    """The pair's checked splits (before anything is written): {split: [(text_a, text_b)]}, and
    their CorpusStats."""
    splits, info = source.split(a, b, args.drop_incomplete)
    empty = [split for split, pairs in splits.items() if not pairs]
    if empty:
        raise AltError(
            f"{source.describe()['path']}: the {' and '.join(empty)} split of {a}-{b} has no "
            "sentence pair"
            + (" left after --drop-incomplete" if args.drop_incomplete else "")
            + "; every split needs at least one"
        )
    test_source = None
    if getattr(args, "carve_test", None):
        splits, test_source = carve_test(splits, args.carve_test, source)
    if args.train_subset:
        if args.train_subset > len(splits["train"]):
            raise AltError(f"--train-subset {args.train_subset} > {len(splits['train'])} training pairs")
        splits["train"] = splits["train"][: args.train_subset]
    sizes = {s: len(p) for s, p in splits.items()}
    stats = CorpusStats(
        source.describe(), sizes, info["dropped"], info["unassigned"], test_source, in_train(splits, a, b)
    )
    return splits, stats


def carve_test(splits, n, source):
    """A test split carved from train: its last n pairs (ALT lists sentences article by article, so
    the carved articles stay whole but for the first), removed from train. Returns (splits, how)."""
    if "test" in splits:
        raise AltError(
            f"--carve-test {n}: {source.describe()['path']} has a test split of its own; "
            "score on it (leave out --carve-test) or remove it"
        )
    if n >= len(splits["train"]):
        raise AltError(f"--carve-test {n}: train has only {len(splits['train'])} pairs; carve fewer")
    splits = {**splits, "train": splits["train"][:-n], "test": splits["train"][-n:]}
    return splits, f"carved: the last {n} pairs of train, removed from train"


def check_options(dest, options):
    """The options a data directory was started (options.json) or finished (prepare.json) with must
    be these: checked before any step is skipped, so that a resumed prepare never mixes steps of
    two option sets."""
    for name in ("prepare.json", "options.json"):
        path = os.path.join(dest, name)
        found = (read_json(path) or {}).get("options")
        if found is None:
            continue
        differ = options.differences(DataOptions.from_dict(found, path))
        if differ:
            raise AltError(
                f"{dest} was {'prepared' if name == 'prepare.json' else 'started'} with other "
                f"options ({', '.join(differ)}); use another --work, or the options it was started with"
            )


def prepare(args):
    source = corpus_source(args)
    done = []
    for text in args.directions:
        src, tgt = direction(text)
        a, b = pair(src, tgt)
        if (a, b) in done:
            continue
        done.append((a, b))
        dest = data_dir(
            args.work, a, b, data_tag(args.subwords, args.vocab, args.train_subset, args.carve_test)
        )
        options = DataOptions(
            pair=f"{a}-{b}",
            subwords=args.subwords,
            vocab=args.vocab,
            train_subset=args.train_subset,
            drop_incomplete=args.drop_incomplete,
            spm_model_type=(args.spm_model_type or "unigram") if args.subwords == "spm" else None,
            carve_test=args.carve_test or None,
        )
        check_options(dest, options)
        splits, stats = corpus_splits(source, a, b, args)
        texts = raw_texts(splits, a, b)
        raw = os.path.join(dest, "raw")
        if os.path.isdir(raw):
            check_same_corpus(raw, texts, source, dest)
        if os.path.exists(os.path.join(dest, "prepare.json")):
            say(f"{a}-{b}: {dest} is ready (prepare.json exists, same options and corpus): nothing to do")
            continue
        module = "sentencepiece" if args.subwords == "spm" else "subword_nmt"
        if problem := optional.missing(module, f"makes the subwords of --subwords {args.subwords}"):
            raise AltError(problem)
        say(f"{a}-{b} -> {dest}")
        made = missing_directories(dest)
        try:
            with Lock(dest):
                check_options(dest, options)  # another prepare may have started it meanwhile
                write_json(os.path.join(dest, "options.json"), {"options": options.to_dict()})
                prepare_pair(dest, a, b, texts, stats, options, args)
        except AltError:
            # refused input (e.g. a --vocab too large for sentencepiece): the directories made for
            # these options are of no use to a corrected command, which goes elsewhere
            if made:
                shutil.rmtree(made[0], ignore_errors=True)
                remove_empty(made[1:])
            raise


def prepare_pair(dest, a, b, texts, stats, options, args):
    """The steps of one data directory (locked, options checked); finished ones are skipped."""
    raw, sub, tok = (os.path.join(dest, d) for d in ("raw", "sub", "tok"))

    def make_raw(tmp):
        write_raw(tmp, texts)
        write_json(os.path.join(tmp, "stats.json"), dataclasses.asdict(stats))

    bar = progress_bar(None, f"{a}-{b}: raw text", total=4)  # the four steps
    step(raw, make_raw)
    bar.update()
    stats = CorpusStats.read(os.path.join(raw, "stats.json"))  # the finished step's, as written
    sizes, has_test = stats.sizes, "test" in stats.sizes
    say(
        f"  sentences: {', '.join(f'{s} {n:,}' for s, n in sizes.items())}"
        + ("" if has_test else " (no test split: the recipes will score the dev set)")
        + (f" (test {stats.test_source})" if stats.test_source else "")
    )
    if any(stats.dropped.values()):
        say(f"  dropped pairs with an empty or missing side: {stats.dropped}")
    if stats.in_train:
        say(f"  also in train (the same sentence): {in_train_line(stats.in_train, sizes)}")
    if (
        stats.source["kind"] == "release"
        and not args.train_subset
        and [sizes.get(s) for s in SPLITS] != [OFFICIAL_SIZES[s] for s in SPLITS]
    ):
        say(f"  note: the official split has {OFFICIAL_SIZES}; this release gives {sizes}")
    bar.set_description(f"{a}-{b}: subword models")
    if args.subwords == "spm":
        step(sub, lambda tmp: train_spm(tmp, raw, (a, b), args.vocab, options.spm_model_type, args.workers))
    else:
        step(sub, lambda tmp: train_bpe(tmp, raw, (a, b), args.vocab))
    bar.update()
    bar.set_description(f"{a}-{b}: segmenting")
    step(tok, lambda tmp: encode(tmp, raw, sub, (a, b), args.subwords))
    bar.update()
    bar.set_description(f"{a}-{b}: fairseq-preprocess")
    step(os.path.join(dest, "bin"), lambda tmp: binarise(tmp, tok, a, b, has_test, args.workers))
    bar.update()
    bar.close()
    ready = Prepared(
        options=options.to_dict(),
        pair=[a, b],
        source=stats.source,
        sizes=sizes,
        has_test=has_test,
        test_source=stats.test_source or ("test split" if has_test else None),
        dropped=stats.dropped,
        unassigned=stats.unassigned,
        in_train=stats.in_train,
        remove_bpe=remove_bpe_of(args.subwords),
        subsets={s: FAIRSEQ_SUBSET[s] for s in sizes},
        bin="bin",  # in this directory (records.prepared), so that it can move
        raw="raw",
    )
    write_json(os.path.join(dest, "prepare.json"), ready.to_dict())
    say(f"  ready: {dest}/bin ({'train/valid/test' if has_test else 'train/valid, no test'})")


def check(args):
    source = corpus_source(args)
    for text in args.directions:
        a, b = pair(*direction(text))
        splits, info = source.split(a, b, args.drop_incomplete)
        print(
            f"{a}-{b}: OK, "
            + ", ".join(f"{s} {len(p):,}" for s, p in splits.items())
            + (f"; dropped {info['dropped']}" if any(info["dropped"].values()) else "")
            + (f"; {info['unassigned']} sentences in no URL list" if info["unassigned"] else "")
        )
        counts = in_train(splits, a, b)
        if counts:
            sizes = {s: len(p) for s, p in splits.items()}
            print(f"  also in train (the same sentence): {in_train_line(counts, sizes)}")


def toy_language_pair(seed):
    """ctemp-toy-translation's synthetic pair, with a small vocabulary."""
    return ToyLanguagePair(vocab=40, seed=seed)


def toy_release(dest, sizes=(("train", 60), ("dev", 12), ("test", 12)), per_url=4, seed=1):
    """A tiny corpus in the exact release layout: DEST/ALT-Parallel-Corpus-20191206/data_{en,vi,ja}.txt
    (CRLF, "SNT.<urlid>.<sentid>\\t<text>", documents interleaved) and DEST/URL-{train,dev,test}.txt."""
    toy = toy_language_pair(seed)
    corpus = os.path.join(dest, "ALT-Parallel-Corpus-20191206")
    os.makedirs(corpus)
    documents, urlid = [], 70000
    for split, count in sizes:
        for first in range(0, count, per_url):
            urlid += 7
            documents.append(
                (split, urlid, [toy.sentence_pair(3, 8) for _ in range(min(per_url, count - first))])
            )
    random.Random(seed).shuffle(documents)  # as in the release, the splits' documents interleave
    lines, urls = {"en": [], "vi": [], "ja": []}, {s: [] for s, _ in sizes}
    for split, urlid, sentences in documents:
        urls[split].append(f"URL.{urlid}\thttp://en.wikinews.org/wiki/Story_{urlid}\r\n")
        for sentid, (src, tgt) in enumerate(sentences, 1):
            key = f"SNT.{urlid}.{sentid}"
            lines["en"].append(f"{key}\t{src}\r\n")
            lines["vi"].append(f"{key}\t{tgt}\r\n")
            lines["ja"].append(f"{key}\t{' '.join(reversed(tgt.split()))}\r\n")
    for lang, rows in lines.items():
        with open(os.path.join(corpus, f"data_{lang}.txt"), "w", encoding="utf-8", newline="") as f:
            f.writelines(rows)
    for split, rows in urls.items():
        with open(os.path.join(dest, f"URL-{split}.txt"), "w", encoding="utf-8", newline="") as f:
            f.writelines(rows)
    return dest
