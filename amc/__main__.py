"""`python -m amc` runs the CLI."""

from amc.cli import main

main()
