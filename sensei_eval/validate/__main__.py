"""`python -m sensei_eval.validate`."""

from .cli import main

main()
