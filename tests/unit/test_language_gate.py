"""core.guard.language and the gate in core.nearmatch: a near-match is served only when every language
of the two texts has a guard table; otherwise it is queued with "no guard for <language>"."""

from __future__ import annotations

import pytest

from entries import chat
from semula.core.guard.language import GUARDED, languages_of_pair, segments, unguarded_reason
from semula.core.nearmatch import near_match
from semula.core.settings import ProjectSettings
from semula.core.tiers import Tier


def test_the_guarded_languages_are_the_tables() -> None:
    assert GUARDED == {"en", "de", "fr", "es", "pt", "it", "nl", "sv", "pl", "ru", "zh", "ja", "ko", "ar", "hi", "tr"}


@pytest.mark.parametrize("stored, incoming, found, unguarded", [
    ("Is 91 chia hết cho 7?", "Is 91 không chia hết cho 7?", {"vi"}, {"vi"}),  # code-switched: the sentence is vi
    ("Apakah kamu pernah ke Bali tahun lalu?", "Apakah kamu tidak pernah ke Bali tahun lalu?", None, None),
    ("Je, dawa hii inafaa kwa watoto wadogo?", "Je, dawa hii haifai kwa watoto wadogo?", {"sw"}, {"sw"}),
    ("Miért ajánlott a kávé terhesség alatt?", "Miért nem ajánlott a kávé terhesség alatt?", {"hu"}, {"hu"}),
    ("What is the capital of France?", "What's the capital city of France?", {"en"}, set()),
    ("Say hi", "Could you say hi", {"en"}, set()),  # short ASCII: the model is unsure, English by default
    ("Wie spät ist es in Berlin?", "Wie spät ist es jetzt in Berlin?", {"de"}, set()),
    ("東京の人口は？", "東京の人口はどのくらい？", {"ja"}, set()),
    ("Bu kitabı okudum ve çok beğendim.", "Bu kitabı okumadım ama çok merak ediyorum.", {"tr"}, set()),
])
def test_languages_of_a_pair(stored: str, incoming: str, found: set[str] | None, unguarded: set[str] | None) -> None:
    languages = languages_of_pair(stored, incoming)
    if found is None:  # Indonesian and Malay are one language to the model: either, never guarded
        assert set(languages.found) <= {"id", "ms"} and languages.unguarded
    else:
        assert set(languages.found) == found and set(languages.unguarded) == unguarded


def test_every_language_of_a_mixed_text_counts() -> None:
    context = "Summarise the customer's message below in one paragraph.\n\n"
    stored = context + "Tôi muốn đổi chiếc áo này sang cỡ lớn hơn."
    incoming = context + "Tôi không muốn đổi chiếc áo này sang cỡ lớn hơn."
    languages = languages_of_pair(stored, incoming)
    assert "vi" in languages.unguarded
    # a shared English sentence is not identified again: only the differing ones count
    assert languages_of_pair(stored, stored.replace("paragraph", "short paragraph")).found == ("en",)


def test_code_urls_and_numbers_are_not_prose() -> None:
    assert segments("Run `ls -la` then see https://example.com/x?q=1 and 42.\n```py\nprint(1)\n```") == (
        "Run then see and", )


def test_the_reason_names_the_language() -> None:
    assert unguarded_reason(languages_of_pair("Nataka chai ya moto sasa hivi.", "Sitaki chai ya moto sasa hivi.")) \
        == "no guard for Swahili (sw)"


EMBEDDING_09 = ProjectSettings(embedding_serve_threshold=0.9)
LEXICAL_09 = ProjectSettings(lexical_serve_threshold=0.9)


@pytest.mark.parametrize("stored, incoming, served, reason", [
    ("Hãy giải thích tại sao cây cầu này an toàn cho xe tải.",
     "Hãy giải thích tại sao cây cầu này không an toàn cho xe tải.", False, "no guard for Vietnamese (vi)"),
    ("Ipaliwanag kung bakit ligtas kainin ang kabuteng ito.",
     "Ipaliwanag kung bakit hindi ligtas kainin ang kabuteng ito.", False, "no guard for Tagalog (tl)"),
    ("How can I reset the password of my account on the website?",
     "How can I reset the password of my account on the website quickly?", True, None),
])
def test_the_gate_in_the_near_match(stored: str, incoming: str, served: bool, reason: str | None) -> None:
    verdict = near_match(chat(incoming), chat(stored), EMBEDDING_09, tier=Tier.EMBEDDING, score=0.97)
    assert verdict.serve is served and verdict.reason == reason
    if not served:
        assert verdict.review  # the reviewer sees it, with the reason


def test_the_gate_also_holds_the_lexical_tier() -> None:
    stored = "Jelaskan mengapa jamur ini boleh dimakan mentah oleh anak-anak."
    incoming = "Please jelaskan mengapa jamur ini boleh dimakan mentah oleh anak-anak."
    english = near_match(chat("Please explain why this mushroom may be eaten raw by children."),
                         chat("Explain why this mushroom may be eaten raw by children."), LEXICAL_09)
    assert english.serve  # "please" is a harmless edit: served at a lexical threshold of 0.9
    verdict = near_match(chat(incoming), chat(stored), LEXICAL_09)
    assert not verdict.serve and (verdict.reason or "").startswith("no guard for")


def test_calibration_never_lifts_the_gate() -> None:
    stored = "Hãy giải thích tại sao cây cầu này an toàn cho xe tải."
    incoming = "Hãy giải thích tại sao cây cầu này không an toàn cho xe tải."
    settings = ProjectSettings(near_serve="calibrated", max_false_hit_rate=0.1)
    verdict = near_match(chat(incoming), chat(stored), settings, tier=Tier.EMBEDDING, score=0.97,
                         learnt_thresholds={"vi": 0.5})
    assert not verdict.serve and verdict.reason == "no guard for Vietnamese (vi)"
