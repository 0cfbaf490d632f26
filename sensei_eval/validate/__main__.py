"""`python -m sensei_eval.validate`."""

from sensei_eval.cli.validate import main

main()
