"""``python -m spu …`` is the ``spu`` command."""

from spu.cli import main

main()
