"""The placeholder styles, the markup cases an outside check broke (issue 33, item 4), and the
placement rules they pinned down. Alignments are built by hand, so every position is known."""
from __future__ import annotations

import pytest

from model.alignments.word_alignment import TokenAlignment
from service.protection.markup import MarkupError, read_markup
from service.protection.placeholders import find_placeholders, find_protected
from service.protection.placement import _largest_run, prepare, restore
from tests.service.hand_alignment import aligned, words


def diagonal(prepared, translation: str) -> TokenAlignment:
    n = min(len(words(prepared.model_text)), len(words(translation)))
    return aligned(prepared.model_text, translation, [(i, i) for i in range(n)])


@pytest.mark.parametrize("text, found", [
    # coreutils' stat: conversion letters printf does not define are placeholders all the same.
    ("File: %N\n Size: %-10s\tBlocks: %-10b IO Block: %-6o %F\n",
     [("printf", "%N"), ("printf", "%-10s"), ("printf", "%-10b"), ("printf", "%-6o"), ("printf", "%F")]),
    ("%H:%M:%S, %m/%D, %'d, %zu, %lld %%", [("printf", "%H"), ("printf", "%M"), ("printf", "%S"), ("printf", "%m"),
                                            ("printf", "%D"), ("printf", "%'d"), ("printf", "%zu"), ("printf", "%lld"),
                                            ("printf", "%%")]),
    # Written one against the next, they are one part: put back one by one they came apart ("%s %s").
    ("Error: %s%s, %lld%%, {0}{1}, &nbsp;&#8212;", [("printf", "%s%s"), ("printf", "%lld%%"), ("brace", "{0}{1}"),
                                                    ("entity", "&nbsp;&#8212;")]),
    ("%1$s of %2$*3$d", [("printf", "%1$s"), ("printf", "%2$*3$d")]),
    ("Copied %1 of %2 files to %L3.", [("qt", "%1"), ("qt", "%2"), ("qt", "%L3")]),
    ("Hello %(name)s, %(count) 5.2f left", [("python", "%(name)s"), ("python", "%(count) 5.2f")]),
    ("Hi %{user}, %<count>d new", [("ruby", "%{user}"), ("ruby", "%<count>d")]),
    ("{name!r:>10} {0:.2f} {} {items[0]} {{0}} {{ title }}",
     [("brace", "{name!r:>10}"), ("brace", "{0:.2f}"), ("brace", "{}"), ("brace", "{items[0]}"),
      ("brace", "{{0}}"), ("brace", "{{ title }}")]),
    ("{0,number,#} of {1, date, short}", [("icu", "{0,number,#}"), ("icu", "{1, date, short}")]),
    # i18next's formatted and unescaped interpolations are one template variable, braces and all (the
    # ICU-looking inside alone had been kept, and the model dropped the outer braces).
    ("You have {{count, number}} items, {{- name}}", [("brace", "{{count, number}}"), ("brace", "{{- name}}")]),
    ("Tom &amp; Jerry &nbsp; &#8212; &#x2014;", [("entity", "&amp;"), ("entity", "&nbsp;"), ("entity", "&#8212;"),
                                                ("entity", "&#x2014;")]),
    ("${HOME}/x, ${name:-none}, `${user.name}` ${formatPrice(total)}",
     [("shell", "${HOME}"), ("shell", "${name:-none}"), ("code", "`${user.name}`"), ("shell", "${formatPrice(total)}")]),
    # A template's variables, helpers, tags and comments, whatever their inside (Jinja, Go, Handlebars).
    ("Hi {{ name | upper }}, {{len .Items}} {{#if admin}}Admin{{/if}} {{{raw}}} {% if user %}back{% endif %} {# x #}",
     [("brace", "{{ name | upper }}"), ("brace", "{{len .Items}}"), ("brace", "{{#if admin}}"), ("brace", "{{/if}}"),
      ("brace", "{{{raw}}}"), ("brace", "{% if user %}"), ("brace", "{% endif %}"), ("brace", "{# x #}")]),
    ("Hello { $user }, { -brand-name } has { NUMBER($count, minimumFractionDigits: 2) } of { -brand.gender }",
     [("fluent", "{ $user }"), ("fluent", "{ -brand-name }"), ("fluent", "{ NUMBER($count, minimumFractionDigits: 2) }"),
      ("fluent", "{ -brand.gender }")]),
    ("The :attribute must be at least :min characters (:count).",
     [("laravel", ":attribute"), ("laravel", ":min"), ("laravel", ":count")]),
    ("Error: :message", [("laravel", ":message")]),
    # A colon in a word, a time, a URL, an emoji, or after punctuation (words translators translate) is none.
    ("At 12:30 see a:b, :smile:, ?:help, [hour:minute[:second]] and std::string", []),
    # Literal syntax in braces (net-tools, onboard, bison): kept whole; braces around prose are not.
    ("route {-V|--version} QUIRKS={metacity|compiz|mutter} '{...}' cp x.{c,h} {with spaces}",
     [("brace", "{-V|--version}"), ("brace", "{metacity|compiz|mutter}"), ("brace", "{...}"), ("brace", "{c,h}")]),
    # Prose: a percent sign before a space, a digit or the end is no conversion.
    ("100% sure, 50 % off, 30%.", []),
    # URLs and e-mail addresses, with the angle brackets around them; sentence punctuation is not theirs.
    ("Report bugs to <bugs@example.org>; see https://x.org/a_(b). Or www.example.org.",
     [("email", "<bugs@example.org>"), ("url", "https://x.org/a_(b)"), ("url", "www.example.org")]),
    # Paths of two parts or more; "and/or", "I/O" and "1/2" are prose.
    ("Edit ~/.bashrc, run ./configure, read /etc/apt/sources.list; and/or I/O 1/2",
     [("path", "~/.bashrc"), ("path", "./configure"), ("path", "/etc/apt/sources.list")]),
    # Options standing as words, with their quotes; not a hyphen inside a word, a minus or a dash.
    ("  -v, --verbose  with --color=never, '--block-size=M', --size[=SIZE] -rf; re-use -5 e-mail x -- y",
     [("option", "-v"), ("option", "--verbose"), ("option", "--color=never"), ("option", "'--block-size=M'"),
      ("option", "--size[=SIZE]"), ("option", "-rf")]),
    # A hyphen after a closing bracket, a quote that closes a word or a sign that ends one joins a
    # compound; at the start, after a space, an opening bracket or an opening quote, an option starts.
    ("Stat64()-Datei, IP(v4)-Adresse, 'Eingabe'-Taste, »Datei«-Menü, „Neu“-Knopf, </interface>-Knopf (-v) '-q' »-x«",
     [("option", "(-v)"), ("option", "'-q'"), ("option", "»-x«")]),
    ('GTK+-Bibliothek, C++-Compiler, Yahoo!-Konto, To:-Feld, "Öffnen mit..."-Dialog, 45°-Winkel [-a] (-b)',
     [("option", "[-a]"), ("option", "(-b)")]),
    ("-v at the start, and '--size=M' quoted", [("option", "-v"), ("option", "'--size=M'")]),
    # Options a usage line joins with bars are one: taken one by one, the bars were lost between them.
    ("hostname -V|--version|-h|--help  print info", [("option", "-V|--version|-h|--help")]),
    ("route [-v|-q] [-a|-b|-c]", [("option", "[-v|-q]"), ("option", "[-a|-b|-c]")]),
    # A usage line's optional option goes out and back with its brackets: left in, they reached the
    # model empty and came back beside it ("route -v-FC[]").
    ("route [-v] [-FC] {add|del} [-P|-d printer]",
     [("option", "[-v]"), ("option", "[-FC]"), ("brace", "{add|del}"), ("option", "-P|-d")]),
    # A command line in quotes, placeholders and an option, is one part with its quotes; placeholders
    # alone in a pair, or glued to each other, are not.
    ("Try `%s --help' or '%s -v -q', not '%s %s' or '%s%s' -x",
     [("option", "`%s --help'"), ("option", "'%s -v -q'"), ("printf", "%s"), ("printf", "%s"), ("printf", "%s%s"),
      ("option", "-x")]),
    # Markdown code spans whole, with their backticks; GNU's quotes (`a' and `b') are none, nor a span in a word.
    ("Run `npm install` and `%s --force`, not `a' or `b', x`y` or ` z `",
     [("code", "`npm install`"), ("code", "`%s --force`")]),
    # Apple's variables a stringsdict or String Catalog substitutes, and `%arg` in their variations.
    ("%@ ate %#@appleCount@, %1$#@files@ and %arg apples", [("printf", "%@"), ("printf", "%#@appleCount@"),
                                                         ("printf", "%1$#@files@"), ("printf", "%arg")]),
    # A browser extension's named placeholders; not a price, a positional `$1` nor `$$`.
    ("$COUNT$ items selected by $user_name$ for $5 or $$10$ ($1)",
     [("webextension", "$COUNT$"), ("webextension", "$user_name$")]),
    # Weblate's markers for the placeholders it took out; nothing else in square brackets.
    ("Trusted by [X11X]\nSHA1 [X19X]: [X] [x1x] [X1] [X12X ]",
     [("weblate", "[X11X]"), ("weblate", "[X19X]")]),
])
def test_every_placeholder_style_is_found_whole(text, found):
    assert [(p.kind, p.text) for p in find_protected(text)] == found
    for p in find_protected(text):
        assert text[p.start:p.end] == p.text


def test_parts_read_already_prepare_the_same_text_and_only_plain_text_takes_them():
    text = "Copy %s to {dest} as Brompton"
    found = find_protected(text, ["Brompton"])
    assert prepare(text, terms=["Brompton"], found=found) == prepare(text, terms=["Brompton"])
    with pytest.raises(ValueError, match="^found protected parts are offsets into plain text$"):
        prepare("<b>%s</b>", "html", found=[])


def test_styles_can_be_chosen_and_terms_stay_kept_with_none():
    text = "Copy %s to {dest} as Brompton"
    assert [p.text for p in find_protected(text, ["Brompton"], styles=("brace",))] == ["{dest}", "Brompton"]
    assert [p.text for p in find_protected(text, ["Brompton"], styles=())] == ["Brompton"]
    assert prepare(text, styles=()).model_text == "Copy %s to {dest} as Brompton"


def test_a_tag_wrapping_only_a_placeholder_comes_back_around_it():
    prepared = prepare("A <b>dog</b> and <i>%s</i> cat.", "html")
    assert prepared.model_text == "A dog and cat."
    translation = "Ein Hund und eine Katze."
    # A-Ein dog-Hund and-und cat.-Katze. ("eine" unaligned): before the word after it, as a placeholder.
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (1, 1), (2, 2), (3, 4)]))
    assert restored.text == "Ein <b>Hund</b> und eine <i>%s</i> Katze."
    placeholder, b, i = restored.placed
    assert [restored.text[p.target_start:p.target_end] for p in restored.placed] == ["%s", "<b>Hund</b>", "<i>%s</i>"]
    assert (placeholder.source_start, placeholder.source_end, i.source_start, i.source_end) == (20, 22, 17, 26)


def test_escaped_braces_are_one_literal_placeholder_with_its_spaces():
    prepared = prepare("Two dogs {{0}} play in the snow.")
    assert [p.text for p in prepared.protected] == ["{{0}}"]
    assert prepared.model_text == "Two dogs play in the snow."
    translation = "Zwei Hunde machen im Schnee."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation,
                                                      [(0, 0), (1, 1), (2, 2), (3, 3), (4, 3), (5, 4)]))
    assert restored.text == "Zwei Hunde {{0}} machen im Schnee."


@pytest.mark.parametrize("text, verbatim", [
    ("<script>alert(1)</script> A dog.", "<script>alert(1)</script>"),
    # Valid html: a '<' in a script is raw text, not a tag.
    ("<script>if (a < b) alert(1)</script> A dog.", "<script>if (a < b) alert(1)</script>"),
    ("<style>p > b { color: red }</style> A dog.", "<style>p > b { color: red }</style>"),
    ("<code>ls -l</code> A dog.", "<code>ls -l</code>"),
    ("<pre>a  <b>b</b></pre> A dog.", "<pre>a  <b>b</b></pre>"),
    ('<span translate="no">Brompton</span> A dog.', '<span translate="no">Brompton</span>'),
    ("<span class='brand notranslate'>Brompton <b>S</b></span> A dog.", "<span class='brand notranslate'>Brompton <b>S</b></span>"),
    # an e-book's printed page number: its words had been replaced by the translation's
    ('<span epub:type="pagebreak" title="173" id="Page_173">173</span> A dog.',
     '<span epub:type="pagebreak" title="173" id="Page_173">173</span>'),
    ('<span role="doc-pagebreak" aria-label=" 5. ">5</span> A dog.', '<span role="doc-pagebreak" aria-label=" 5. ">5</span>'),
])
def test_untranslated_elements_pass_through_untouched(text, verbatim):
    prepared = prepare(text, "html")
    assert prepared.model_text == " A dog."
    translation = "Ein Hund."
    restored = restore(prepared, translation, aligned("A dog.", translation, [(0, 0), (1, 1)]))
    assert restored.text == verbatim + " Ein Hund."
    (placed,) = restored.placed
    assert restored.text[placed.target_start:placed.target_end] == verbatim
    assert text[placed.source_start:placed.source_end] == verbatim


def test_untranslated_elements_in_xml_nest_and_a_raw_script_must_close():
    assert read_markup("<code>a <b>b</b></code> c", "xml").tags[0].verbatim == "<code>a <b>b</b></code>"
    with pytest.raises(MarkupError) as error:
        read_markup("x <script>if (a < b)", "html")
    assert str(error.value) == "tag <script> opened at character 2 is never closed"


def test_a_restored_term_is_not_glued_to_the_next_word_when_the_translation_lost_its_punctuation():
    prepared = prepare("Hello world. It is a nice day.", terms=["Hello world"])
    assert prepared.model_text == ". It is a nice day."
    translation = "Es ist ein schöner Tag."
    # "." has no target word; It-Es is-ist a-ein nice-schöner day.-Tag.
    restored = restore(prepared, translation, aligned(prepared.model_text, translation,
                                                      [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4)]))
    assert restored.text == "Hello world Es ist ein schöner Tag."


@pytest.mark.parametrize("text, translation, hard, expected", [
    # Glued to a word in the source, glued in the translation.
    ("Size %sKB left", "Größe KB übrig", [(0, 0), (1, 1), (2, 2)], "Größe %sKB übrig"),
    # Glued to punctuation the translation kept.
    ("with %s.", "mit.", [(0, 0)], "mit %s."),
])
def test_glue_is_kept_only_to_what_it_was_glued_to(text, translation, hard, expected):
    prepared = prepare(text)
    assert restore(prepared, translation, aligned(prepared.model_text, translation, hard)).text == expected


@pytest.mark.parametrize("reference", ["&#0;", "&#xD800;", "&#xFFFE;", "&#x110000;"])
def test_xml_refuses_character_references_to_characters_xml_does_not_allow(reference):
    with pytest.raises(MarkupError) as error:
        read_markup(f"A dog {reference} runs.", "xml")
    assert str(error.value) == f"character reference {reference} at character 6 is not a character XML allows"
    assert read_markup("tab&#9;and&#x1F600;", "xml").plain == "tab\tand\U0001F600"


def test_placeholder_like_text_the_model_made_up_is_removed_and_reported():
    prepared = prepare("Two dogs play in the snow.")
    translation = "Zwei Hunde %s spielen im Schnee {0}."
    restored = restore(prepared, translation, diagonal(prepared, translation))
    assert restored.text == "Zwei Hunde spielen im Schnee."
    assert [(r.kind, r.text, r.at) for r in restored.removed] == [("printf", "%s", 11), ("brace", "{0}", 28)]
    # The source's own placeholders are not stray: each comes back exactly once.
    prepared = prepare("Copy %s now.")
    restored = restore(prepared, "Kopiere %d jetzt.", aligned("Copy now.", "Kopiere %d jetzt.", [(0, 0), (1, 2)]))
    assert restored.text == "Kopiere %s jetzt." and [r.text for r in restored.removed] == ["%d"]
    assert find_placeholders(restored.text) == find_placeholders("Kopiere %s jetzt.")


@pytest.mark.parametrize("targets, run", [
    ([0, 2], [0, 2]),          # one word between: the same run
    ([0, 3, 4], [3, 4]),       # two words between: another run, the longer wins
    ([0, 2, 5, 7, 8], [5, 7, 8]),
    ([1, 4], [1]),             # equal runs: the first
])
def test_the_largest_run_allows_a_gap_of_one_word_and_no_more(targets, run):
    assert _largest_run(targets) == run


@pytest.mark.parametrize("text, fmt, model_text, translation, hard, expected, spans", [
    # The pair goes out with the placeholder and back around it: before, the model saw `""` and
    # the output read 'Warnung: %s""'.
    ('Warning: "%s"', "text", "Warning:", "Warnung:", [(0, 0)], 'Warnung: "%s"', [(10, 12)]),
    # Glued to the colon in the source: after the target of "open", before its colon, spaced as there.
    ("Cannot open '%s': denied", "text", "Cannot open: denied", "Kann nicht öffnen: verweigert",
     [(0, 0), (1, 2), (2, 3)], "Kann nicht öffnen '%s': verweigert", [(19, 21)]),
    ("File “%s” not found", "text", "File not found", "Datei nicht gefunden", [(0, 0), (1, 1), (2, 2)],
     "Datei “%s” nicht gefunden", [(7, 9)]),
    # Written as an entity, the pair comes back as the same entity.
    ("&quot;%s&quot; missing", "html", "missing", "fehlt", [(0, 0)], "&quot;%s&quot; fehlt", [(6, 8)]),
    # GNU's `%s' is a pair: left in, the model wrote the pair empty beside the placeholder ("%s»«").
    ("Setting hostname to `%s'", "text", "Setting hostname to", "Setze Hostname auf",
     [(0, 0), (1, 1), (2, 2)], "Setze Hostname auf `%s'", [(20, 22)]),
    # Parentheses are a pair: "tool %s (%s)" came back "Werkzeug %s %s()".
    ("tool %s (%s)", "text", "tool", "Werkzeug", [(0, 0)], "Werkzeug %s (%s)", [(9, 11), (13, 15)]),
    # A literal has its quotes in its own text; brackets are a pair too.
    ("Use '--all' or <%s>", "text", "Use or", "Nutze oder", [(0, 0), (1, 1)], "Nutze '--all' oder <%s>",
     [(6, 13), (20, 22)]),
    # A quoted command line goes out and back whole: one by one, the placeholders came back beside
    # the empty pair the model kept ("Versuchen Sie %s --help`' für").
    ("Try `%s --help' for more", "text", "Try for more", "Versuchen Sie für mehr", [(0, 0), (0, 1), (1, 2), (2, 3)],
     "Versuchen Sie `%s --help' für mehr", [(14, 25)]),
])
def test_a_placeholder_in_quotes_goes_out_and_back_with_them(text, fmt, model_text, translation, hard, expected,
                                                             spans):
    prepared = prepare(text, fmt)
    assert prepared.model_text == model_text
    restored = restore(prepared, translation, aligned(model_text, translation, hard))
    assert restored.text == expected
    assert [(p.target_start, p.target_end) for p in restored.placed] == spans
    assert [restored.text[a:b] for a, b in spans] == [p.text for p in prepared.protected]


@pytest.mark.parametrize("text, model_text", [
    ('"%s %d"', '""'),            # two parts in one pair: neither has the pair to itself
    ("'-v'%s'", "'"),             # the opening quote is the option's closing one: taken with it already
    ("'%s", "'"),                 # no closing quote
    ("'%s\"", "'\""),             # not a pair
    ('"<b>%s</b>" now', '"" now'),  # a tag between: the tag wrapping only %s takes it back whole
])
def test_a_pair_that_is_not_the_parts_own_stays_in_the_text(text, model_text):
    assert prepare(text, "html" if "<b>" in text else "text").model_text == model_text


@pytest.mark.parametrize("text, found", [
    ("_Open", [0]), ("Save _As...", [5]), ("&File", [0]), ("E&xit", [1]), ("Show _hidden files", [5]),
    ("&4. Filename", [0]),
    ("_size must not be <2", []),     # an identifier: at the label's start only before a capital or digit
    ("max_size too big", []),         # inside a word of lower-case ASCII: an identifier
    # Inside a word of letters, before a lower-case one: where translators put it as often as not.
    ("Ni_ght Mode", [2]), ("Au_sgewähltes Format verwenden", [2]), ("Akt_ualisiere Cursor", [3]),
    ("N_otizbuchname:", [1]),
    ("The object_id value is missing.", []), ("pam_start: error", []),  # lower-case ASCII: identifiers
    ("de_DE", []), ("WM_ROLE", []), ("Itdb_Track ID", []),  # no lower-case letter after it
    ("Sc_anner-Einstellungen", []), ("Use x_y2 now", []),  # not a word of letters
    ("_One and _Two", []), ("__init__", []),  # more than one
    ("AT&T and R&D", []), ("Q&&A", []), ("Tom & Jerry", []),  # before a capital, doubled, alone
    # Over ACCELERATOR_MAX_WORDS words: `_` before a word of letters only, in a text without `%`.
    ("Keep main _window in front after applying effect", [10]),
    ("Enable IEEE 128-bit floating point via the _float128 keyword.", []),
    ("non-local variable %qD declared %<_thread%> has a non-trivial destructor", []),
    ("-F = Alter any bad family lineage pointers (to _badptr)", []),
    ("By convention SELinux User names usually end in an _u.", []),
    ("Use drag&drop to move the files into the folder", []),  # `&` only in labels of up to six words
    ("This sentence of seventeen words is far too long to be the label of any dialog, so _Open stays", []),
])
def test_an_accelerator_is_read_only_where_it_is_unambiguous(text, found):
    assert [p.start for p in find_protected(text) if p.kind == "accelerator"] == found
    assert [p.text for p in find_protected(text) if p.kind == "accelerator"] == [text[i] for i in found]


@pytest.mark.parametrize("text, fmt, model_text, translation, hard, expected, placement", [
    ("_Open", "text", "Open", "Öffnen", [(0, 0)], "_Öffnen", "aligned"),
    # On the target word aligned to the marked one, wherever the translation put it.
    ("Save _As...", "text", "Save As...", "Speichern unter ...", [(0, 0), (1, 1)], "Speichern _unter ...", "aligned"),
    # Inside a word: the target word's first letter (its own letters are other ones).
    ("E&xit", "text", "Exit", "Beenden", [(0, 0)], "&Beenden", "aligned"),
    # Before the first letter, not the punctuation in front of it.
    ("Open &Recent", "text", "Open Recent", "(Zuletzt) öffnen", [(0, 1), (1, 0)], "(&Zuletzt) öffnen", "aligned"),
    # The marked word aligned to nothing: the first word of the translation.
    ("Open _Recent", "text", "Open Recent", "Zuletzt öffnen", [(0, 1)], "_Zuletzt öffnen", "fallback"),
    # Inside a tag opened at that word: after the opening tag.
    ("<b>_Open</b> file", "html", "Open file", "Datei öffnen", [(0, 1), (1, 0)], "Datei <b>_öffnen</b>", "aligned"),
])
def test_an_accelerator_goes_before_the_first_letter_of_the_aligned_word(text, fmt, model_text, translation, hard,
                                                                        expected, placement):
    prepared = prepare(text, fmt)
    assert prepared.model_text == model_text
    restored = restore(prepared, translation, aligned(model_text, translation, hard))
    assert restored.text == expected
    [placed] = [p for p in restored.placed if p.kind == "accelerator"]
    assert (placed.placement, restored.text[placed.target_start:placed.target_end]) == (placement, text[placed.source_start])


def test_a_text_with_an_accelerator_is_not_sent_as_written():
    from service.protected_translation import tried_as_written
    assert tried_as_written(prepare("Copy %s here"))
    assert not tried_as_written(prepare("Copy %s to &Clipboard"))


@pytest.mark.parametrize("text, translation, hard, expected", [
    # The sentence's question mark joined the wrapped word's translation: it stays outside.
    ("<b>Delete</b> all files?", "Alle Dateien löschen?", [(0, 2), (1, 0), (2, 1)], "Alle Dateien <b>löschen</b>?"),
    ("Click <a href='#'>here</a>.", "Klicken Sie hier.", [(0, 0), (1, 2)], "Klicken Sie <a href='#'>hier</a>."),
    ("(<i>dog</i>)", "(Hund)", [(0, 0)], "(<i>Hund</i>)"),
    # Punctuation the tag wrapped in the source stays inside in the translation.
    ("<b>Delete all files?</b>", "Alle Dateien löschen?", [(0, 2), (1, 0), (2, 1)], "<b>Alle Dateien löschen?</b>"),
    ("<i>(dog)</i>", "(Hund)", [(0, 0)], "<i>(Hund)</i>"),
    # ... and no more than that: the sentence's comma after it stays outside.
    ("Hi <b>(dog)</b>, go", "Hallo (Hund), geh", [(0, 0), (1, 1), (2, 2)], "Hallo <b>(Hund)</b>, geh"),
    ("Hi <b>{{name}}</b>, go", "Hallo {{name}}, geh", [(0, 0), (1, 1), (2, 2)], "Hallo <b>{{name}}</b>, geh"),
    # A run of punctuation only is wrapped whole.
    ("Really <b>?!</b>", "Wirklich ?!", [(0, 0), (1, 1)], "Wirklich <b>?!</b>"),
    # So is the translation of a text a tag holds whole: nothing stood outside it in the source.
    ("<h1>A day in the park</h1>", "Ein Tag im Park!", [(0, 0), (1, 1), (3, 3), (4, 3)], "<h1>Ein Tag im Park!</h1>"),
    ("<b>Delete all files</b>?", "Alle Dateien löschen?", [(0, 2), (1, 0), (2, 1)], "<b>Alle Dateien löschen</b>?"),
])
def test_a_tag_leaves_out_the_punctuation_around_its_words_unless_it_wrapped_some(text, translation, hard, expected):
    prepared = prepare(text, "html")
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, hard))
    assert restored.text == expected


def test_a_tag_around_every_source_word_is_around_the_whole_translation():
    # The alignment leaves the first and last target words out of every link ("Ein" and "Spät"),
    # and the largest run of the rest would cut them off: the paragraph still holds them.
    prepared = prepare("<p>Click <b>here</b> now.</p>", "html")
    translation = "Ein Klicken hier jetzt Spät."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 1), (1, 2), (2, 3)]))
    assert restored.text == "<p>Ein Klicken <b>hier</b> jetzt Spät.</p>"


@pytest.mark.parametrize("text, translation, expected, tag_span", [
    # A label a program joins to a value keeps its space inside the tag, as sent.
    ("<b>Unit file: </b>", "Unit-Datei:", "<b>Unit-Datei: </b>", (0, 19)),
    ("<b> Unit file:</b>", "Unit-Datei:", "<b> Unit-Datei:</b>", (0, 19)),
    # Outside the tags, before and after them.
    (" <b>Unit file:</b>\n", "Unit-Datei:", " <b>Unit-Datei:</b>\n", (1, 19)),
    ("<br><b>Created: </b>", "Erstellt:", "<br><b>Erstellt: </b>", (4, 21)),
])
def test_the_whitespace_at_a_markup_texts_edges_comes_back_where_it_was_among_the_tags(text, translation, expected,
                                                                                    tag_span):
    prepared = prepare(text, "html")
    assert prepared.model_text.strip() == prepared.model_text.strip(" ") and not prepared.model_text.endswith(" ")
    restored = restore(prepared, translation, diagonal(prepared, translation))
    assert restored.text == expected
    (b,) = [p for p in restored.placed if p.text == "<b>"]
    assert (b.target_start, b.target_end) == tag_span and expected[b.target_start:b.target_end].startswith("<b>")
    # The translation's characters still address the output: its last one is the colon.
    assert expected[restored.char_start[len(translation) - 1]] == ":"


def test_edge_whitespace_goes_inside_the_tag_that_ends_the_output_as_it_ended_the_source():
    # The alignment put the colon in the second tag: the space is inside the tag that ends both.
    prepared = prepare("<b>Unit</b> <i>file: </i>", "html")
    restored = restore(prepared, "Unit-Datei:", aligned(prepared.model_text, "Unit-Datei:", [(0, 0), (1, 0)]))
    assert restored.text == "<b>Unit-Datei</b><i>: </i>"
    # After a placeholder at the end, the space follows it, outside the tag, as in the source.
    prepared = prepare("<b>Unit file:</b> %1 ", "html")
    restored = restore(prepared, "Unit-Datei:", aligned(prepared.model_text, "Unit-Datei:", [(0, 0), (1, 0)]))
    assert restored.text == "<b>Unit-Datei:</b> %1 "
    assert [(p.text, p.target_start, p.target_end) for p in restored.placed] == [("%1", 19, 21), ("<b>", 0, 18)]


@pytest.mark.parametrize("text, translation, expected", [
    # The placeholder goes before the punctuation that followed it in the source, not before the
    # punctuation the word before it had: "gelöscht %1:]" was wrong.
    ("[This message was deleted: %1]", "[Diese Nachricht wurde gelöscht:]", "[Diese Nachricht wurde gelöscht: %1]"),
    ("Read with %s.", "Gelesen mit.", "Gelesen mit %s."),
    # The target's punctuation differs from the source's: before all of it, as before.
    ("Read with %s.", "Gelesen mit!", "Gelesen mit %s!"),
    # Placeholders one against the next go back together: one by one they came back "%s %s".
    ("Error: %s%s not found", "Fehler: nicht gefunden", "Fehler: %s%s nicht gefunden"),
    ("to change (<1>%s%c%s%s.", "zu ändern (<1>.", "zu ändern (<1>%s%c%s%s."),
])
def test_placeholders_go_back_beside_what_stood_beside_them_in_the_source(text, translation, expected):
    prepared = prepare(text)
    restored = restore(prepared, translation, diagonal(prepared, translation))
    assert restored.text == expected


@pytest.mark.parametrize("text, fmt, translation, links, expected", [
    # Code put before the sentence's first word leaves it mid-sentence: a German word never a noun drops its capital.
    ("Use <code>--force</code> to overwrite.", "html", "Zum Überschreiben verwenden.", [(0, 2), (1, 0), (2, 1)],
     "<code>--force</code> zum Überschreiben verwenden."),
    ("Use `--force` to overwrite.", "text", "Zum Überschreiben verwenden.", [(0, 2), (1, 0), (2, 1)],
     "`--force` zum Überschreiben verwenden."),
    # Kept: after a placeholder (measured worse), a noun, and where the source starts with the code and a capital.
    ("Use %s to overwrite.", "text", "Zum Überschreiben verwenden.", [(0, 2), (1, 0), (2, 1)],
     "%s Zum Überschreiben verwenden."),
    ("<code>x</code> files are here.", "html", "Dateien sind hier.", [(0, 0), (1, 1), (2, 2)],
     "<code>x</code> Dateien sind hier."),
    ("<code>x</code> The files are here.", "html", "Die Dateien sind hier.", [(0, 0), (1, 1), (2, 2), (3, 3)],
     "<code>x</code> Die Dateien sind hier."),
])
def test_code_put_before_a_sentence_takes_the_capital_of_a_german_function_word_after_it(text, fmt, translation, links,
                                                                                          expected):
    prepared = prepare(text, fmt)
    assert restore(prepared, translation, aligned(prepared.model_text, translation, links)).text == expected
