"""CLDR's English and German names, a lexicon for the software models: countries and regions,
languages, scripts, currencies, time zones and their cities, months and weekdays.

Software shows these names everywhere (locale and time-zone pickers, currency fields, date
formats), and the Debian catalogs teach few of them: the software model wrote "Norway", "Italy"
and "Finland" unchanged and "Sweden" as "Schwenken". CLDR (the Unicode Common Locale Data
Repository, Unicode License v3) is what localisers take them from; babel ships it, and the pinned
babel version fixes the CLDR release, so a rebuild gives the same bytes.

Pairs: the name CLDR gives a key in English beside the one it gives in German, NFC and spaces
normalised; an English name CLDR names two ways in German is left out (the model could not know
which), and so is every English name whose near key a valid or test split of the excluded corpora
holds (the Debian corpus': its scores stay on strings no training data held). Split by the SHA-256
of the English name: a tenth is valid, the rest train.
"""
from __future__ import annotations

import gzip
import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

# Imported here, not where used: the CLI reports a missing babel (the `train` extra) in one line.
import babel
from babel import Locale
from babel.core import get_global
from babel.dates import get_timezone_location

from training.corpus.build import excluded_keys, write_gzip
from training.corpus.clean import near_key, normalise
from training.corpus.tmx import write_tmx

SPLITS = ("train", "valid")
VALID_SHARE = 10   # one English name in VALID_SHARE goes to valid
# The metazone forms a time-zone picker shows ("Central European Time", "... Standard Time").
ZONE_FORMS = ("generic", "standard", "daylight")


@dataclass(frozen=True)
class Name:
    origin: str   # "territory:AT": the CLDR category and key
    en: str
    de: str


def cldr_names() -> Iterator[Name]:
    en, de = Locale("en"), Locale("de")
    for category, attribute in (("territory", "territories"), ("language", "languages"),
                                ("script", "scripts"), ("currency", "currencies")):
        english, german = getattr(en, attribute), getattr(de, attribute)
        for key in sorted(english):
            if key in german:
                yield Name(f"{category}:{key}", english[key], german[key])
    for category, attribute in (("month", "months"), ("weekday", "days")):
        english, german = getattr(en, attribute)["format"]["wide"], getattr(de, attribute)["format"]["wide"]
        for key in sorted(english):
            yield Name(f"{category}:{key}", english[key], german[key])
    for zone in sorted(en.meta_zones):
        english, german = en.meta_zones[zone].get("long", {}), de.meta_zones.get(zone, {}).get("long", {})
        for form in ZONE_FORMS:
            if form in english and form in german:
                yield Name(f"metazone:{zone}:{form}", english[form], german[form])
    for zone in sorted(get_global("zone_territories")):
        if zone.startswith("Etc/"):
            continue
        english = get_timezone_location(zone, locale="en", return_city=True)
        german = get_timezone_location(zone, locale="de", return_city=True)
        yield Name(f"city:{zone}", english, german)


def split_of(english: str) -> str:
    digest = hashlib.sha256(english.encode("utf-8")).digest()
    return "valid" if int.from_bytes(digest[:8], "big") % VALID_SHARE == 0 else "train"


def lexicon(names: Sequence[Name], excluded: set[str], counts: Counter[str]) -> dict[str, list[Name]]:
    """Normalised, unambiguous, deduplicated names by split, in CLDR's order; `counts` gets
    what was left out and why."""
    normalised = [Name(name.origin, normalise(name.en), normalise(name.de)) for name in names]
    germans: dict[str, set[str]] = defaultdict(set)
    for name in normalised:
        germans[name.en].add(name.de)
    out: dict[str, list[Name]] = {split: [] for split in SPLITS}
    seen: set[str] = set()
    for name in normalised:
        if not name.en or not name.de:
            counts["empty"] += 1
        elif len(germans[name.en]) > 1:
            counts["two German names"] += 1
        elif name.en in seen:
            counts["duplicate"] += 1
        elif near_key(name.en) in excluded:
            counts["in an excluded split"] += 1
        else:
            seen.add(name.en)
            out[split_of(name.en)].append(name)
            counts["kept"] += 1
    return out


def write_names(out: Path, by_split: dict[str, list[Name]], counts: Counter[str], exclude: Sequence[Path]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    for split, names in by_split.items():
        write_gzip(out / f"{split}.en.gz", [name.en for name in names])
        write_gzip(out / f"{split}.de.gz", [name.de for name in names])
        write_gzip(out / f"{split}.origin.gz", [name.origin for name in names])
    per_category = Counter((split, name.origin.split(":")[0]) for split, names in by_split.items() for name in names)
    categories = sorted({category for _, category in per_category})
    table = ["| category | " + " | ".join(SPLITS) + " |", "|---|" + "---:|" * len(SPLITS)]
    table += [f"| {category} | " + " | ".join(str(per_category[(split, category)]) for split in SPLITS) + " |"
              for category in categories]
    table.append("| all | " + " | ".join(str(len(by_split[split])) for split in SPLITS) + " |")
    identical = {split: sum(name.en == name.de for name in names) for split, names in by_split.items()}
    left_out = ", ".join(f"{reason} {count}" for reason, count in sorted(counts.items()) if reason != "kept")
    excluded = " ".join(f"`{path}`" for path in exclude) or "none"
    (out / "README.md").write_text(
        f"""# CLDR names, English and German

Written by `python -m training.corpus names --out {out}{''.join(' --exclude ' + str(p) for p in exclude[:1])}{''.join(' ' + str(p) for p in exclude[1:])}`
(training/corpus/names.py says how): the names CLDR gives countries and regions, languages,
scripts, currencies, time zones and their cities, months and weekdays, in English and in German, from
babel {babel.__version__} (pinned in pyproject.toml: the babel release fixes the CLDR release, so a
rebuild gives these bytes). Licence: CLDR's (Unicode, Inc.'s licence for data files), which permits
this use with its notice beside the data: `LICENSE` here.

Files: `SPLIT.en.gz`, `SPLIT.de.gz` (one name a line, aligned) and `SPLIT.origin.gz` (the CLDR category
and key, `territory:AT`). Split by the SHA-256 of the English name, one in {VALID_SHARE} to valid.
Left out: {left_out}; every name whose English a valid or test split of {excluded} holds would be too
(those splits stay unseen), {counts['in an excluded split']} were.
Names German writes as English does: train {identical['train']}, valid {identical['valid']}.

{chr(10).join(table)}
""", encoding="utf-8")
    return f"{out}: train {len(by_split['train'])}, valid {len(by_split['valid'])} names; left out: {left_out}"


def memory_names(names: Sequence[Name], by_split: dict[str, list[Name]]) -> list[Name]:
    """The lexicon's names (both splits, in CLDR's order: `names`) that a whole UI segment means
    nothing else by: not ISO 15924's special scripts (Zyyy "Common" -> "Unbestimmt", Zinh
    "Inherited" -> "Geerbter Schriftwert", Zxxx "Unwritten": a settings tab "Common" is "Allgemein"),
    nor a script named like a country ("Myanmar", the script "Birmanisch", the country
    "Myanmar (Burma)")."""
    kept = {name.origin: name for split in SPLITS for name in by_split[split]}
    countries = {name.en.split(" (")[0] for name in names if name.origin.startswith("territory:")}
    out = []
    for name in names:
        if name.origin not in kept:
            continue
        category, _, key = name.origin.partition(":")
        if category == "script" and (key.startswith("Z") or kept[name.origin].en in countries):
            continue
        out.append(kept[name.origin])
    return out


def write_memory(path: Path, names: Sequence[Name]) -> str:
    """`names` as a translation memory the service answers whole segments from (service/memory.py):
    the names the models still get wrong ("Sunday", "Austria") come out as CLDR writes them."""
    count = write_tmx(path, ((name.origin, {"en": name.en, "de": name.de}) for name in names), "en",
                      f"CLDR's English and German names from babel {babel.__version__} (training/corpus/names.py); "
                      "Unicode License v3: LICENSE")
    return f"{path}: {count} names"


def build_names(out: Path, exclude: Sequence[Path], memory: Path | None = None) -> str:
    counts: Counter[str] = Counter()
    names = list(cldr_names())
    by_split = lexicon(names, excluded_keys(exclude), counts)
    said = write_names(out, by_split, counts, exclude)
    return said if memory is None else f"{said}\n{write_memory(memory, memory_names(names, by_split))}"
