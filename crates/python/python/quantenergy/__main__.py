"""The ``quantenergy`` command: the Rust CLI, run in this process."""

import sys

from . import _native


def main() -> None:
    sys.exit(_native.cli(["quantenergy", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
