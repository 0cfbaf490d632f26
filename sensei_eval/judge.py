"""`python -m sensei_eval.judge`: the README's main job keeps its name; the command is `sensei_eval.cli.judge`."""

from sensei_eval.cli.judge import main

if __name__ == '__main__':
    main()
