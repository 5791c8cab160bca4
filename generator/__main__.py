"""`python -m torchfl_gen ...` is the torchfl-gen command."""
from .cli import main

main()
