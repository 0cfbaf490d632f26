"""The one error family (`core.errors`) and the one config-file reader (`core.config.load_config_file`)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import sensei_eval
from sensei_eval.core.config import load_config_file
from sensei_eval.core.errors import ConfigError, InputError, SenseiError, describe_error


def _package_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(sensei_eval.__path__, 'sensei_eval.'):
        if '.migrations' in info.name or info.name.endswith('__main__'):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed here
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == info.name:
                found[f'{cls.__module__}.{cls.__qualname__}'] = cls
    return list(found.values())


def test_every_exception_the_package_defines_is_a_sensei_error() -> None:
    classes = _package_exceptions()
    assert len(classes) > 30
    # a Warning is issued, not raised (`JudgeMetricWarning`): it is not an error of the family
    assert [c.__qualname__ for c in classes if not issubclass(c, SenseiError | Warning)] == []


def test_describe_error_words_ours_as_they_are_and_others_with_their_type_and_cause() -> None:
    assert describe_error(ConfigError('bad value', file='run.yaml', line=3, field='variants')) == (
        'run.yaml:3 field `variants`: bad value'
    )
    try:
        try:
            raise OSError('connection refused')
        except OSError as e:
            raise RuntimeError('cannot reach the server') from e
    except RuntimeError as e:
        assert describe_error(e) == 'RuntimeError: cannot reach the server (connection refused)'
    assert describe_error(ValueError()) == 'ValueError'
    assert len(describe_error(ValueError('x' * 1000), limit=50)) == 50


def test_load_config_file_reads_by_suffix_and_names_the_file_and_line(tmp_path: Path) -> None:
    yaml_file = tmp_path / 'run.yaml'
    yaml_file.write_text('variants: 2\ncomponents:\n  citation_quality: CITATIONS\n')
    data, lines = load_config_file(yaml_file)
    assert data == {'variants': 2, 'components': {'citation_quality': 'CITATIONS'}}
    assert lines == {('variants',): 1, ('components',): 2, ('components', 'citation_quality'): 3}
    toml_file = tmp_path / 'run.toml'
    toml_file.write_text('variants = 2\n')
    assert load_config_file(toml_file) == ({'variants': 2}, {})

    bad_json = tmp_path / 'p.json'
    bad_json.write_text('{\n  "name": "x",\n  "checks": [\n}\n')
    with pytest.raises(ConfigError) as e:
        load_config_file(bad_json, what='profile')
    assert (e.value.file, e.value.line) == (str(bad_json), 4) and str(e.value).startswith(f'{bad_json}:4: not valid JSON')

    bad_yaml = tmp_path / 'p.yaml'
    bad_yaml.write_text('name: x\nchecks: [\n')
    with pytest.raises(ConfigError, match=r'p\.yaml:3: not valid YAML'):
        load_config_file(bad_yaml)

    class ProfileProblem(ConfigError):
        pass

    with pytest.raises(ProfileProblem, match=r'missing\.toml: cannot read the profile \(No such file'):
        load_config_file(tmp_path / 'missing.toml', what='profile', error=ProfileProblem)


def test_the_family_keeps_the_python_bases_callers_catch() -> None:
    from sensei_eval.core.sanitize import JsonLimitError
    from sensei_eval.evaluators.base import JudgeError
    from sensei_eval.judging.profiles import ProfileError

    assert issubclass(ProfileError, ConfigError) and issubclass(ProfileError, ValueError)
    assert issubclass(JsonLimitError, InputError) and issubclass(JsonLimitError, ValueError)
    assert issubclass(JudgeError, RuntimeError)
