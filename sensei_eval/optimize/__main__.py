"""`python -m sensei_eval.optimize`: the command is `sensei_eval.cli.optimize`."""

from sensei_eval.cli.optimize import main

main()
