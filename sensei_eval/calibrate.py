"""`python -m sensei_eval.calibrate`, like `sensei_eval.judge`: the command is `sensei_eval.cli.calibrate`."""

from sensei_eval.cli.calibrate import run

if __name__ == '__main__':
    run()
