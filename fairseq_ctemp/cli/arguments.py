"""argparse types shared by the command-line tools."""

import argparse


def comma_list(convert, what, distinct=False):
    """An argparse type: comma-separated `what` (e.g. "numbers"), each read by convert. An empty
    entry ("1,,2", "1,") is refused rather than dropped: it is usually a typo; with distinct, so is
    a value given twice ("1,1.0"), which would name one thing twice."""

    def parse(text):
        items = [item.strip() for item in text.split(",")]
        try:
            values = [convert(item) for item in items] if all(items) else None
        except ValueError:
            values = None
        if values is None:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got '{text}'")
        if distinct and len(set(values)) < len(values):
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, each once, got '{text}'")
        return values

    return parse


numbers = comma_list(float, "numbers")  # the sweep checks its grids itself: values naming one run
integers = comma_list(int, "integers")
names = comma_list(str, "names", distinct=True)
distinct_numbers = comma_list(float, "numbers", distinct=True)
distinct_integers = comma_list(int, "integers", distinct=True)
