"""Turkish (tr): negation by suffix (gel-me-di, gel-mi-yor, gel-mez), değil/yok/hiç, the
without-suffix -sız/-siz; words carry case endings, so entries also match as stems."""

from semula.core.guard.languages.table import LanguageTable

# The negative verb suffix -ma/-me (vowel harmony) and its usual continuations; the guard
# finds it after the stem two words share ("geliyor" / "gelmiyor", "yaptı" / "yapmadı").
_NEGATIVE_VERB = (
    "maz mez mam mem madı medi madım medim madın medin madık medik madılar mediler "
    "mamış memiş mayacak meyecek mayacağım meyeceğim mayacağız meyeceğiz mıyor miyor muyor müyor "
    "mıyorum miyorum muyorum müyorum mıyorsun miyorsun mıyoruz miyoruz mıyorlar miyorlar muyorlar müyorlar "
    "mamalı memeli mamak memek mayın meyin mayız meyiz masın mesin mazsın mezsin madan meden mayan meyen "
    "mayarak meyerek mazlar mezler mamıştır memiştir mayınız meyiniz"
)

TABLE = LanguageTable(
    code="tr",
    name="Turkish",
    negators={
        "not": "değil degil değildir değiller yok yoktur hiç hiçbir hiçbiri hiçbirşey hiçkimse hayır",
        "never": "asla",
        "without": "olmadan olmaksızın",
        "except": "hariç dışında",
    },
    negating_suffixes=_NEGATIVE_VERB + " sız siz suz süz",
    numbers={
        0: "sıfır", 2: "iki", 3: "üç", 4: "dört", 5: "beş", 6: "altı", 7: "yedi", 8: "sekiz", 9: "dokuz",
        20: "yirmi", 30: "otuz", 40: "kırk", 50: "elli", 60: "altmış", 70: "yetmiş", 80: "seksen",
        90: "doksan", 10**6: "milyon", 10**9: "milyar",
    },
    weak_numbers={1: "bir", 10: "on", 100: "yüz", 1000: "bin"},
    ordinals={
        1: "birinci ilk", 2: "ikinci", 3: "üçüncü", 4: "dördüncü", 5: "beşinci", 6: "altıncı", 7: "yedinci",
        8: "sekizinci", 9: "dokuzuncu", 10: "onuncu", 20: "yirminci", 100: "yüzüncü",
    },
    months={
        1: "ocak", 2: "şubat", 3: "mart", 4: "nisan", 5: "mayıs", 6: "haziran", 7: "temmuz", 8: "ağustos",
        9: "eylül", 10: "ekim", 11: "kasım", 12: "aralık",
    },
    weekdays={1: "pazartesi", 2: "salı", 3: "çarşamba", 4: "perşembe", 5: "cuma", 6: "cumartesi", 7: "pazar"},
    antonyms="""
    fazla|çok / az; önce|evvel / sonra; büyük / küçük
    art|artır|artış|artırmak|yükselt / azal|azalt|azalış|düşür|düşüş; doğru|gerçek / yanlış|sahte
    izin|kabul / reddet|ret|yasakla|yasak; dahil|içer / hariç|dışla; ilk|birinci / son
    minimum|asgari / maksimum|azami; yukarı / aşağı; aç|açık / kapat|kapalı; ekle / sil|kaldır
    etkinleştir|etkin / devre; artan / azalan; giriş / çıkış
    başla|başlangıç / bitir|bitiş|son; hızlı / yavaş; yeni / eski; yüksek / alçak|düşük; iyi / kötü
    ucuz / pahalı; erken / geç; sıcak / soğuk; uzun / kısa; al / sat; kazan / kaybet; iç / dış
    sol / sağ; daima / asla; evet / hayır
    """,
    quantifiers={
        "all": "tüm bütün hepsi",
        "some": "bazı birkaç",
        "any": "herhangi",
        "both": "ikisi",
        "few": "az",
        "many": "çok birçok",
        "most": "çoğu",
        "only": "sadece yalnızca yalnız",
    },
    stem_suffix_max=5,
)
