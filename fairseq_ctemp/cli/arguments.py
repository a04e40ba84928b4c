"""argparse types shared by the command-line tools."""

import argparse


def comma_list(convert, what):
    """An argparse type: comma-separated `what` (e.g. "numbers"), each read by convert. An empty
    entry ("1,,2", "1,") is refused rather than dropped: it is usually a typo."""

    def parse(text):
        items = [item.strip() for item in text.split(",")]
        try:
            if all(items):
                return [convert(item) for item in items]
        except ValueError:
            pass
        raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got '{text}'")

    return parse


numbers = comma_list(float, "numbers")
integers = comma_list(int, "integers")
names = comma_list(str, "names")
