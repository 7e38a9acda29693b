"""Never a wrong answer, through the real proxy: changes the normaliser and the word overlap must see.

One auto-mode proxy records each original; a replay-mode proxy on the same store, with the
provider gone, must refuse the changed request (a 404 miss) and still serve the original.
"""

from __future__ import annotations

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, openai_client, uniq

pytestmark = pytest.mark.e2e

RUN = uniq("correct")
OPERATOR = (f"In Python ({RUN}), what does `if a == b: print(1)` print when a is 2 and b is 2?",
            f"In Python ({RUN}), what does `if a != b: print(1)` print when a is 2 and b is 2?")
INDENTED = (
    f"What does this print? ({RUN})\n```python\nfor i in range(3):\n    x = i\n    print(x)\n```",
    f"What does this print? ({RUN})\n```python\nfor i in range(3):\n    x = i\nprint(x)\n```",
)
CASES = {"operator": OPERATOR, "indentation": INDENTED}


def ask(client, text: str) -> str:
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": text}])
    return completion.choices[0].message.content or ""


def test_a_changed_operator_or_indentation_is_a_replay_miss(proxy_factory: ProxyFactory,
                                                            fake_provider: FakeProvider) -> None:
    recorder = proxy_factory("auto")
    client = openai_client(recorder.proxy_url, recorder.ca_path)
    answers = {name: ask(client, original) for name, (original, _) in CASES.items()}
    recorder.stop()

    replay = proxy_factory("replay", recorder.data_dir, upstream="gone")
    client = openai_client(replay.proxy_url, replay.ca_path)
    before = fake_provider.count()
    for name, (original, changed) in CASES.items():
        assert ask(client, original) == answers[name], f"{name}: the original must still replay"
        with pytest.raises(openai.NotFoundError, match="no recording matches"):
            ask(client, changed)
    assert fake_provider.count() == before
