"""The guard in every language of its tables: an edit that adds, drops or swaps a negation,
changes a number, ordinal, month or weekday, swaps an opposite or a quantifier is refused with
that class's reason; a harmless edit (politeness, a filler, an article, punctuation) is not.

One table per language: (class, stored, incoming). Class "same" means the guard must pass.
"""

from __future__ import annotations

import pytest

from semula.core.guard import guard

TABLE: dict[str, list[tuple[str, str, str]]] = {
    "en": [
        ("negation", "Should I water the plants daily?", "Should I not water the plants daily?"),
        ("negation", "The function returns a value.", "The function never returns a value."),
        ("number", "Book a table for four people.", "Book a table for six people."),
        ("date", "The meeting is on Monday.", "The meeting is on Friday."),
        ("antonym", "Sort the list in ascending order.", "Sort the list in descending order."),
        ("quantifier", "Delete all the temporary files.", "Delete some of the temporary files."),
        ("same", "Can you explain how photosynthesis works?", "Could you explain how photosynthesis works?"),
        ("same", "Please summarise this article.", "Summarise this article."),
    ],
    "de": [
        ("negation", "Ich habe heute Zeit für ein Meeting.", "Ich habe heute keine Zeit für ein Meeting."),
        ("negation", "Der Server ist erreichbar.", "Der Server ist nicht erreichbar."),
        ("negation", "Er raucht manchmal.", "Er raucht nie."),
        ("number", "Wir brauchen zwei Zimmer.", "Wir brauchen drei Zimmer."),
        ("number", "Es sind einundzwanzig Teilnehmer.", "Es sind zweiundzwanzig Teilnehmer."),
        ("number", "Lies das zweite Kapitel.", "Lies das dritte Kapitel."),
        ("date", "Der Termin ist im März.", "Der Termin ist im Mai."),
        ("date", "Wir treffen uns am Dienstag.", "Wir treffen uns am Donnerstag."),
        ("antonym", "Sortiere die Werte aufsteigend.", "Sortiere die Werte absteigend."),
        ("antonym", "Soll ich den Preis erhöhen?", "Soll ich den Preis senken?"),
        ("quantifier", "Lösche alle Dateien.", "Lösche einige Dateien."),
        ("same", "Kannst du mir bitte helfen?", "Kannst du mir helfen?"),
        ("same", "Erkläre mir die Photosynthese.", "Erkläre mir bitte die Photosynthese!"),
    ],
    "fr": [
        ("negation", "Je veux réserver une chambre.", "Je ne veux pas réserver une chambre."),
        ("negation", "Il fume le soir.", "Il ne fume jamais le soir."),
        ("negation", "Il travaille ici.", "Il ne travaille plus ici."),
        ("negation", "Un café avec du sucre.", "Un café sans sucre."),
        ("number", "Il me faut deux billets.", "Il me faut trois billets."),
        ("number", "Lis le premier chapitre.", "Lis le deuxième chapitre."),
        ("date", "La réunion est lundi.", "La réunion est mercredi."),
        ("date", "Le contrat commence en janvier.", "Le contrat commence en février."),
        ("antonym", "Faut-il augmenter le budget ?", "Faut-il diminuer le budget ?"),
        ("quantifier", "Supprime tous les fichiers.", "Supprime quelques fichiers."),
        ("same", "Je ne sais pas nager, que faire ?", "Je sais pas nager, que faire ?"),
        ("same", "Peux-tu m'aider, s'il te plaît ?", "Peux-tu m'aider ?"),
    ],
    "es": [
        ("negation", "Quiero café por la mañana.", "No quiero café por la mañana."),
        ("negation", "Él fuma en casa.", "Él nunca fuma en casa."),
        ("number", "Necesito dos entradas.", "Necesito tres entradas."),
        ("number", "Quiero un café.", "Quiero dos cafés."),
        ("date", "La cita es el lunes.", "La cita es el viernes."),
        ("antonym", "Ordena la lista de forma ascendente.", "Ordena la lista de forma descendente."),
        ("quantifier", "Borra todos los archivos.", "Borra algunos archivos."),
        ("same", "Quiero un café.", "Quiero el café."),
        ("same", "¿Puedes ayudarme, por favor?", "¿Puedes ayudarme?"),
    ],
    "pt": [
        ("negation", "Eu gosto de café.", "Eu não gosto de café."),
        ("negation", "Ela viaja de avião.", "Ela nunca viaja de avião."),
        ("number", "Preciso de dois bilhetes.", "Preciso de quatro bilhetes."),
        ("date", "A reunião é na segunda-feira.", "A reunião é na sexta-feira."),
        ("date", "As férias começam em julho.", "As férias começam em agosto."),
        ("antonym", "Devo aumentar o preço?", "Devo diminuir o preço?"),
        ("quantifier", "Apague todos os arquivos.", "Apague alguns arquivos."),
        ("same", "Você pode me ajudar, por favor?", "Você pode me ajudar?"),
    ],
    "it": [
        ("negation", "Mi piace il caffè.", "Non mi piace il caffè."),
        ("negation", "Lui fuma la sera.", "Lui non fuma mai la sera."),
        ("number", "Mi servono ventuno sedie.", "Mi servono ventitré sedie."),
        ("number", "Prenoto per cinque persone.", "Prenoto per sette persone."),
        ("date", "La riunione è lunedì.", "La riunione è giovedì."),
        ("antonym", "Devo aprire la finestra?", "Devo chiudere la finestra?"),
        ("quantifier", "Cancella tutti i file.", "Cancella alcuni file."),
        ("same", "Puoi aiutarmi, per favore?", "Puoi aiutarmi?"),
    ],
    "nl": [
        ("negation", "Ik wil koffie.", "Ik wil geen koffie."),
        ("negation", "De server is bereikbaar.", "De server is niet bereikbaar."),
        ("negation", "Hij rookt soms.", "Hij rookt nooit."),
        ("number", "We hebben twee kamers nodig.", "We hebben drie kamers nodig."),
        ("number", "Er zijn tweeëntwintig deelnemers.", "Er zijn drieëntwintig deelnemers."),
        ("date", "De vergadering is op maandag.", "De vergadering is op woensdag."),
        ("antonym", "Sorteer de lijst oplopend.", "Sorteer de lijst aflopend."),
        ("quantifier", "Verwijder alle bestanden.", "Verwijder sommige bestanden."),
    ],
    "sv": [
        ("negation", "Jag vill ha kaffe.", "Jag vill inte ha kaffe."),
        ("negation", "Han röker ibland.", "Han röker aldrig."),
        ("number", "Vi behöver två rum.", "Vi behöver tre rum."),
        ("number", "Det finns tjugoett deltagare.", "Det finns tjugotvå deltagare."),
        ("date", "Mötet är på måndag.", "Mötet är på fredag."),
        ("antonym", "Ska jag öka priset?", "Ska jag minska priset?"),
        ("quantifier", "Ta bort alla filer.", "Ta bort några filer."),
    ],
    "pl": [
        ("negation", "Chcę kawę.", "Nie chcę kawy."),
        ("negation", "On pali wieczorem.", "On nigdy nie pali wieczorem."),
        ("number", "Potrzebuję dwóch biletów.", "Potrzebuję trzech biletów."),
        ("number", "Przeczytaj pierwszy rozdział.", "Przeczytaj drugi rozdział."),
        ("date", "Spotkanie jest w poniedziałek.", "Spotkanie jest w piątek."),
        ("date", "Urlop zaczyna się w lipcu.", "Urlop zaczyna się w sierpniu."),
        ("antonym", "Czy mam zwiększyć budżet?", "Czy mam zmniejszyć budżet?"),
        ("quantifier", "Usuń wszystkie pliki.", "Usuń niektóre pliki."),
    ],
    "ru": [
        ("negation", "Он знает ответ.", "Он не знает ответ."),
        ("negation", "Она курит вечером.", "Она никогда не курит вечером."),
        ("number", "Мне нужно два билета.", "Мне нужно три билета."),
        ("number", "Для двух человек.", "Для пяти человек."),
        ("number", "Прочитай первую главу.", "Прочитай вторую главу."),
        ("date", "Встреча в марте.", "Встреча в апреле."),
        ("date", "Созвон в понедельник.", "Созвон во вторник."),
        ("antonym", "Нужно увеличить бюджет?", "Нужно уменьшить бюджет?"),
        ("quantifier", "Удали все файлы.", "Удали некоторые файлы."),
    ],
    "zh": [
        ("negation", "我喜欢咖啡。", "我不喜欢咖啡。"),
        ("negation", "他去过北京。", "他没去过北京。"),
        ("number", "我需要三张票。", "我需要五张票。"),
        ("date", "会议在星期一。", "会议在星期三。"),
        ("date", "项目三月开始。", "项目五月开始。"),
        ("antonym", "请按升序排列。", "请按降序排列。"),
        ("quantifier", "删除所有文件。", "删除一些文件。"),
    ],
    "ja": [
        ("negation", "コーヒーが好きです。", "コーヒーが好きではありません。"),
        ("negation", "彼は肉を食べる。", "彼は肉を食べない。"),
        ("number", "チケットを三枚ください。", "チケットを五枚ください。"),
        ("date", "会議は月曜日です。", "会議は金曜日です。"),
        ("antonym", "昇順で並べてください。", "降順で並べてください。"),
        ("quantifier", "すべてのファイルを削除して。", "一部のファイルを削除して。"),
    ],
    "ko": [
        ("negation", "저는 커피를 좋아해요.", "저는 커피를 좋아하지 않아요."),
        ("negation", "그는 고기를 먹어요.", "그는 고기를 안 먹어요."),
        ("number", "표 둘 주세요.", "표 다섯 주세요."),
        ("date", "회의는 월요일에 있어요.", "회의는 금요일에 있어요."),
        ("antonym", "오름차순으로 정렬해 주세요.", "내림차순으로 정렬해 주세요."),
        ("quantifier", "모든 파일을 삭제하세요.", "일부 파일을 삭제하세요."),
    ],
    "ar": [
        ("negation", "أحب القهوة", "لا أحب القهوة"),
        ("negation", "ذهبت إلى السوق", "لم أذهب إلى السوق"),
        ("number", "أحتاج ثلاثة تذاكر", "أحتاج خمسة تذاكر"),
        ("date", "الاجتماع يوم الاثنين", "الاجتماع يوم الخميس"),
        ("antonym", "رتب القائمة تصاعدي", "رتب القائمة تنازلي"),
        ("quantifier", "احذف كل الملفات", "احذف بعض الملفات"),
    ],
    "hi": [
        ("negation", "मुझे कॉफी पसंद है", "मुझे कॉफी पसंद नहीं है"),
        ("negation", "दरवाज़ा खोलो", "दरवाज़ा मत खोलो"),
        ("number", "मुझे दो टिकट चाहिए", "मुझे तीन टिकट चाहिए"),
        ("date", "बैठक सोमवार को है", "बैठक शुक्रवार को है"),
        ("antonym", "कीमत बढ़ाना है", "कीमत घटाना है"),
        ("quantifier", "सभी फ़ाइलें हटाओ", "कुछ फ़ाइलें हटाओ"),
    ],
    "tr": [
        ("negation", "Eve geliyor.", "Eve gelmiyor."),
        ("negation", "Dün kitabı okudu.", "Dün kitabı okumadı."),
        ("negation", "Şekerli çay istiyorum.", "Şekersiz çay istiyorum."),
        ("negation", "Bu doğru.", "Bu doğru değil."),
        ("number", "İki bilet istiyorum.", "Üç bilet istiyorum."),
        ("date", "Toplantı pazartesi günü.", "Toplantı cuma günü."),
        ("date", "Tatil temmuzda başlıyor.", "Tatil ağustosta başlıyor."),
        ("antonym", "Fiyatı artırmalı mıyım?", "Fiyatı azaltmalı mıyım?"),
        ("quantifier", "Tüm dosyaları sil.", "Bazı dosyaları sil."),
    ],
}

REASON = {"negation": "negation", "number": "number", "date": "date", "antonym": "antonym", "quantifier": "quantifier"}
CASES = [
    pytest.param(cls, stored, incoming, id=f"{lang}-{cls}-{n}")
    for lang, rows in TABLE.items()
    for n, (cls, stored, incoming) in enumerate(rows)
]


@pytest.mark.parametrize(("cls", "stored", "incoming"), CASES)
def test_each_language_refuses_with_the_class_reason(cls: str, stored: str, incoming: str) -> None:
    reason = guard(stored, incoming)
    if cls == "same":
        assert reason is None, reason
    else:
        assert reason is not None and reason.startswith(REASON[cls]), reason
        assert guard(incoming, stored) is not None  # and the other way round


def test_every_language_has_a_table() -> None:
    from semula.core.guard.languages import TABLES

    codes = {t.code for t in TABLES}
    assert codes == {"en", "de", "fr", "es", "pt", "it", "nl", "sv", "pl", "ru", "zh", "ja", "ko", "ar", "hi", "tr"}
    assert codes <= set(TABLE)


@pytest.mark.parametrize(
    ("stored", "incoming", "script"),
    [
        ("ทำไมท้องฟ้าเป็นสีฟ้า", "ทำไมท้องฟ้าไม่เป็นสีฟ้า", "Thai"),
        ("Γιατί ο ουρανός είναι μπλε;", "Γιατί ο ουρανός δεν είναι μπλε;", "Greek"),
        ("למה השמיים כחולים?", "למה השמיים לא כחולים?", "Hebrew"),
    ],
)
def test_a_script_no_table_covers_is_never_judged_harmless(stored: str, incoming: str, script: str) -> None:
    assert guard(stored, incoming) == guard(stored, incoming)
    reason = guard(stored, incoming) or ""
    assert reason.startswith(f"script not covered ({script})"), reason
