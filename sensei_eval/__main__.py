"""`sensei-eval` (or `python -m sensei_eval`): the one command line, `sensei_eval.cli.app`."""

from sensei_eval.cli.app import main

if __name__ == '__main__':
    main()
