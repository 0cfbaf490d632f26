"""Names that moved in issue 43 (one name per concept, one home per name) still work for one release, with a
DeprecationWarning naming the new home; the new home is where the name is defined."""

from __future__ import annotations

import pytest

import sensei_eval.optimize as optimize
from sensei_eval.agents import components, runner


@pytest.mark.parametrize(
    ('name', 'home'),
    [('PromptComponents', components), ('load_components', components), ('Query', runner), ('load_runner', runner)],
)
def test_the_agents_names_still_import_from_optimize_with_a_warning(name: str, home: object) -> None:
    with pytest.warns(DeprecationWarning, match=f'sensei_eval.optimize.{name} is deprecated'):
        assert getattr(optimize, name) is getattr(home, name)
    assert name not in optimize.__all__


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        optimize.NoSuchThing  # noqa: B018
