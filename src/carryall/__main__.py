"""`python -m carryall` is the `carryall` command."""

from carryall.cli import main

main()
