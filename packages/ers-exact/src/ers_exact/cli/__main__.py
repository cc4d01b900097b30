"""``python -m ers_exact.cli``: the same as the ``ers-exact`` console script."""

from ers_exact.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
