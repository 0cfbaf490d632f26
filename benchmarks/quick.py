"""Every benchmark's quick mode, one after the other: what CI runs so that no benchmark can rot.

Each script under `benchmarks/` takes `--quick` (small sizes, seconds) and prints its figures; this runs
them as a user would (`python benchmarks/X.py --quick`, from the project root), prints each one's output,
exit code and wall time, and exits 1 when any failed. A new benchmark is picked up by its file name.

    python benchmarks/quick.py            # all
    python benchmarks/quick.py scale tokens
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Seconds one quick mode may take before it counts as failed (a hung benchmark must not hang CI).
TIMEOUT_S = 600


def main(names: list[str]) -> int:
    # a module other benchmarks import (no `__main__` block, e.g. billing_agent.py) is not a benchmark
    scripts = sorted(
        p
        for p in (ROOT / 'benchmarks').glob('*.py')
        if p.stem != 'quick' and not p.stem.startswith('_') and "if __name__ == '__main__':" in p.read_text()
    )
    if names:
        scripts = [p for p in scripts if p.stem in names]
    failed: list[str] = []
    for script in scripts:
        print(f'=== {script.name} --quick', flush=True)
        start = time.monotonic()
        try:
            code = subprocess.run([sys.executable, str(script), '--quick'], cwd=ROOT, timeout=TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            code = -1
            print(f'timed out after {TIMEOUT_S} s')
        took = time.monotonic() - start
        print(f'--- {script.name}: exit {code} in {took:.1f} s', flush=True)
        if code != 0:
            failed.append(script.name)
    ran = len(scripts) - len(failed)
    print(f'quick modes: {ran} of {len(scripts)} ran clean' + (f'; failed: {", ".join(failed)}' if failed else ''))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
