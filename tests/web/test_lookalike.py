"""Titles as a reader sees them (issue 45): the detector compares title words by their Unicode confusable
skeletons (TS #39), after NFKC, case, white space and diacritic folding, and a policy title in mixed scripts
is refused with one line.

The cases are generated. Titles: every source-study title of the suite (the quoted titles in the citations
of ``environment/tasks/*/spec/spec.yaml``) and of the demo tasks (the quoted titles in their answers'
sources) that a policy accepts. Look-alike letters: for each letter or digit, every letter or digit of the
Latin, Greek, Cyrillic, Cherokee, phonetic, letterlike, fullwidth and mathematical blocks that TS #39 (ICU's
``SpoofChecker``) gives the same skeleton and that NFKC leaves as a look-alike of it; invisible characters:
ICU's Default_Ignorable_Code_Point and Bidi_Control sets; white space: ICU's White_Space set; combining
marks: the Combining Diacritical Marks block.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import icu
import pytest
import yaml
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from tools_server.web.detector import Detector
from tools_server.web.policy import Policy, PolicyError

_SPOOF = icu.SpoofChecker()


def skeleton(text: str) -> str:
    """The TS #39 skeleton, from ICU directly (the generators do not go through the code under test)."""
    return _SPOOF.getSkeleton(0, text)


REPO = Path(__file__).resolve().parents[2]
_QUOTED = re.compile(
    r"[\"\u201c]([^\"\u201c\u201d]{8,})[\"\u201d]|(?:^|[\s,(])['\u2018]([^'\u2018\u2019]{8,}?)['\u2019](?=[\s,.;)]|$)"
)


def _quoted_titles(text: str) -> list[str]:
    """The quoted strings of a citation that a policy accepts as a title (4 words, 20 letters)."""
    found = []
    for match in _QUOTED.finditer(text):
        candidate = (match.group(1) or match.group(2)).strip()
        try:
            Policy.from_dict({"title": candidate})
        except PolicyError:
            continue
        found.append(candidate)
    return found


def _suite_titles() -> dict[str, list[str]]:
    out = {}
    for spec in sorted((REPO / "environment" / "tasks").glob("*/spec/spec.yaml")):
        citation = yaml.safe_load(spec.read_text(encoding="utf-8"))["citation"]
        text = citation.get("title", "") if isinstance(citation, dict) else citation
        out[spec.parent.parent.name] = _quoted_titles(f'"{text}"' if isinstance(citation, dict) else text)
    return out


def _demo_titles() -> dict[str, list[str]]:
    out = {}
    for answers in sorted((REPO / "environment" / "demo_tasks").glob("*/answers.json")):
        data = json.loads(answers.read_text(encoding="utf-8"))
        sources = {s for group in data["groups"] for s in group["sources"].values()}
        out[answers.parent.name] = sorted({t for s in sources for t in _quoted_titles(s)})
    return out


SUITE = _suite_titles()
DEMO = _demo_titles()
TITLES = sorted({t for titles in [*SUITE.values(), *DEMO.values()] for t in titles})


def test_every_suite_task_has_a_source_title():
    """The generated cases cover every task: each suite spec names its source study's title, and the demo
    tasks whose sources are articles or handbook chapters do (enzyme-kinetics cites a textbook, which has
    no quoted title)."""
    assert len(SUITE) >= 40 and all(SUITE.values()), [k for k, v in SUITE.items() if not v]
    assert DEMO["aromatic-acidity"] == ["Dissociation Constants of Organic Acids and Bases"]
    assert DEMO["electrolyte-solvents"] == [
        "Nonaqueous Liquid Electrolytes for Lithium-Based Rechargeable Batteries"
    ]
    assert len(TITLES) >= 20


# -- the generated look-alikes -------------------------------------------------------------------------------

_BLOCKS = [
    (0x00C0, 0x052F),  # Latin-1 letters, Latin Extended, IPA, Greek, Cyrillic
    (0x13A0, 0x13FF),  # Cherokee
    (0x1D00, 0x1DBF),  # phonetic extensions
    (0x1E00, 0x1FFF),  # Latin Extended Additional, Greek Extended
    (0x2100, 0x214F),  # letterlike symbols
    (0xA640, 0xA69F),  # Cyrillic Extended-B
    (0xAB70, 0xABBF),  # Cherokee small letters
    (0xFF00, 0xFFEF),  # fullwidth forms
    (0x1D400, 0x1D7FF),  # mathematical alphanumerics
]


@functools.cache
def _lookalikes() -> dict[str, list[str]]:
    """For each ASCII letter and digit, the letters and digits with the same TS #39 skeleton that NFKC
    leaves looking like it (``ſ`` has the skeleton of ``f`` but NFKC makes ``s`` of it: left out)."""
    by_shape: dict[str, list[str]] = {}
    for a, b in [(0x30, 0x7A), *_BLOCKS]:
        for cp in range(a, b + 1):
            c = chr(cp)
            if not c.isalnum() or unicodedata.category(c) == "Cn":
                continue
            shape = skeleton(c)
            if skeleton(unicodedata.normalize("NFKC", c)) == shape:
                by_shape.setdefault(shape, []).append(c)
    out = {}
    for x in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz":
        others = [c for c in by_shape.get(skeleton(x), []) if c != x]
        if others:
            out[x] = others
    return out


def _icu_set(pattern: str) -> list[str]:
    chars = icu.UnicodeSet(pattern)
    return [c for c in chars if len(c) == 1 and not 0xD800 <= ord(c) <= 0xDFFF]


INVISIBLE = _icu_set("[[:Default_Ignorable_Code_Point:][:Bidi_Control:]]")
WHITE_SPACE = _icu_set("[:White_Space:]")
LINE_BREAKS = frozenset("\n\r")
MARKS = [chr(cp) for cp in range(0x0300, 0x0370) if unicodedata.category(chr(cp)) == "Mn"]


def test_the_generators_draw_from_real_data():
    """The look-alikes hold the classic spoofs, and the character sets are Unicode's."""
    looks = _lookalikes()
    assert {"а", "ɑ", "α", "ａ"} <= set(looks["a"])  # Cyrillic, Latin alpha, Greek, fullwidth
    assert {"С", "Ꮯ", "Ｃ", "ℂ"} <= set(looks["C"])  # Cyrillic, Cherokee, fullwidth, double-struck
    assert "ſ" not in looks.get("f", []) and "Ϲ" not in looks["C"]  # NFKC makes s and Σ of them
    assert {"\u200b", "\u200d", "\u00ad", "\u2060", "\ufeff", "\u202e", "\U000e0041"} <= set(INVISIBLE)
    assert {"\u00a0", "\u2009", "\u3000", "\u2028"} <= set(WHITE_SPACE)
    assert len(INVISIBLE) > 4000 and len(MARKS) == 112


_CASES = [str, str.upper, str.lower, str.title, str.swapcase]


@st.composite
def lookalike_spelling(draw: st.DrawFn, text: str, line_breaks: bool = True) -> str:
    """``text`` as a spoofer or a sloppy converter might write it: its case changed, letters replaced by
    look-alikes, combining marks and invisible characters added, spaces replaced by other white space."""
    text = draw(st.sampled_from(_CASES))(text)
    spaces = [c for c in WHITE_SPACE if line_breaks or c not in LINE_BREAKS]
    looks = _lookalikes()
    out = []
    for ch in text:
        if ch == " ":
            out.append("".join(draw(st.lists(st.sampled_from(spaces), min_size=1, max_size=3))))
            continue
        if ch in looks and draw(st.booleans()):
            ch = draw(st.sampled_from(looks[ch]))
        out.append(ch)
        if ch.isalnum():
            if draw(st.integers(0, 7)) == 0:
                out.append(draw(st.sampled_from(MARKS)))
            if draw(st.integers(0, 7)) == 0:
                out.append(draw(st.sampled_from(INVISIBLE)))
    return "".join(out)


@functools.cache
def _detector(title: str) -> Detector:
    return Detector(Policy.from_dict({"title": title}))


#: A failing spelling is reported as drawn, not shrunk: shrinking a draw per character of a title takes
#: minutes and says little more than the title and the spelling do.
NO_SHRINK = settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])

_PAGES = [
    "{}",
    "<html><body><h1>{}</h1><p>Received 3 May; accepted 9 June.</p></body></html>",
    "Cited as {}.",
]


@NO_SHRINK
@given(st.data())
def test_a_lookalike_spelling_of_every_source_title_is_flagged(data):
    title = data.draw(st.sampled_from(TITLES))
    spelled = data.draw(lookalike_spelling(title))
    page = data.draw(st.sampled_from(_PAGES)).format(spelled)
    assert _detector(title).scan(page) == ["title"], (title, spelled)


@pytest.mark.parametrize("title", TITLES)
def test_each_source_title_is_flagged_in_every_look_alike_script(title):
    """Deterministically, per title: every letter replaced by one look-alike from each source at once
    (the first and the last look-alike in the generator's list), in upper and lower case."""
    looks = _lookalikes()
    for case in (str.lower, str.upper):
        for pick in (0, -1):
            spelled = "".join(looks[c][pick] if c in looks else c for c in case(title))
            assert _detector(title).scan(spelled) == ["title"], spelled


def _near_miss(draw: st.DrawFn, title: str) -> str:
    """A text near the title: the title with one word replaced by a word of another title, the title cut
    short, or another study's title."""
    words = title.split()
    kind = draw(st.sampled_from(["replace", "truncate", "other"]))
    if kind == "replace":
        i = draw(st.integers(0, len(words) - 1))
        other = draw(st.sampled_from([w for t in TITLES for w in t.split()]))
        return " ".join([*words[:i], other, *words[i + 1 :]])
    if kind == "truncate":
        cut = draw(st.integers(1, len(words)))
        return " ".join(words[:cut]) + draw(st.sampled_from(["", " …", " and more words follow here"]))
    return draw(st.sampled_from(TITLES))


@NO_SHRINK
@given(st.data())
def test_a_lookalike_spelling_never_changes_the_verdict(data):
    """Whatever the text near a title (a changed word, a truncation, another title), writing it with
    look-alikes gives the verdict its plain spelling gets: harmless text stays unflagged."""
    title = data.draw(st.sampled_from(TITLES))
    plain = _near_miss(data.draw, title)
    spelled = data.draw(lookalike_spelling(plain, line_breaks=False))
    assert _detector(title).scan(spelled) == _detector(title).scan(plain), (title, plain, spelled)


_OTHER_SCRIPTS = st.text(
    alphabet=st.sampled_from(
        [chr(c) for c in range(0x0400, 0x0460) if chr(c).isalpha()]
        + [chr(c) for c in range(0x03B1, 0x03CA)]
        + [" "] * 8
    ),
    min_size=20,
    max_size=400,
)


@given(title=st.sampled_from(TITLES), text=_OTHER_SCRIPTS)
def test_text_in_cyrillic_and_greek_is_not_flagged(title, text):
    assert _detector(title).scan(text) == []


# -- policies ------------------------------------------------------------------------------------------------


def _reads_as_latin(c: str) -> bool:
    return re.fullmatch(r"[A-Za-z]+", skeleton(c)) is not None


@given(st.data())
def test_a_policy_title_in_mixed_scripts_is_refused_with_one_line(data):
    """One letter of a word of two or more letters replaced by a look-alike from another script (not one
    NFKC turns back into Latin): the policy is refused, naming the title's key, on one line."""
    titles = data.draw(st.lists(st.sampled_from(TITLES), min_size=1, max_size=3, unique=True))
    index = data.draw(st.integers(0, len(titles) - 1))
    spots = [
        (m.start() + k, c)
        for m in re.finditer(r"[A-Za-z]{2,}", titles[index])
        for k, c in enumerate(m.group())
        if any(_foreign(x) for x in _lookalikes().get(c, []))
    ]
    at, letter = data.draw(st.sampled_from(spots))
    foreign = data.draw(st.sampled_from([x for x in _lookalikes()[letter] if _foreign(x)]))
    titles[index] = titles[index][:at] + foreign + titles[index][at + 1 :]
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"titles": titles})
    assert err.value.key == f"titles[{index}]" and "mixes scripts" in err.value.problem
    assert "\n" not in str(err.value) and foreign in err.value.problem


def _foreign(c: str) -> bool:
    """A letter of a script other than Latin that stays itself under NFKC and reads as a Latin letter."""
    script = icu.Script.getScript(c).getName()
    return (
        script not in ("Latin", "Common", "Inherited")
        and unicodedata.normalize("NFKC", c) == c
        and (_reads_as_latin(c))
    )


@pytest.mark.parametrize(
    "title",
    [
        "Inhibition of NF-κB signalling by α-helix mimetics in cells",
        "Aβ42 oligomers impair synaptic plasticity in mouse hippocampus",
        "Δ9-tetrahydrocannabinol binding to cannabinoid receptors measured at 10 μM",
        "Синтез и свойства новых соединений lithium",  # a Cyrillic title naming one Latin word
    ],
)
def test_greek_symbols_and_whole_words_of_one_script_are_accepted(title):
    """Not look-alikes: Greek letters standing as symbols (β reads as ß, not as a basic Latin letter), and
    words each wholly in one script that do not read as Latin words."""
    assert Policy.from_dict({"title": title}).titles == (title,)


def test_policy_check_refuses_a_mixed_script_title_with_one_line(spu_env, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("titles:\n  - Comprehensive characterization of \u0441ytochrome P450 selectivity\n")
    checked = subprocess.run(
        [sys.executable, "-m", "spu", "audit", "policy", "check", str(path)],
        env=spu_env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert checked.returncode == 1, checked.stderr
    assert checked.stderr.count("\n") == 1 and checked.stderr.startswith(f"error: {path}: titles[0]: ")
    assert "'\u0441ytochrome' mixes scripts" in checked.stderr and "'cytochrome'" in checked.stderr


# Policy files written every way YAML allows: each scalar plain, quoted or a block scalar, each list in block
# or flow style, the mapping in either style, its keys in any order, singular or plural keys.
_STR = "tag:yaml.org,2002:str"
_SCALAR_STYLES = [None, "'", '"', "|", ">"]


@st.composite
def policies(draw: st.DrawFn) -> dict:
    data: dict = {}
    if draw(st.booleans()):
        data["mode"] = draw(st.sampled_from(["observe", "enforce"]))
    titles = draw(st.lists(st.sampled_from(TITLES), min_size=1, max_size=3, unique=True))
    data["titles" if len(titles) > 1 or draw(st.booleans()) else "title"] = (
        titles if len(titles) > 1 or draw(st.booleans()) else titles[0]
    )
    if draw(st.booleans()):
        data["dois"] = draw(
            st.lists(st.from_regex(r"10\.[0-9]{4,5}/[a-z][a-z0-9.\-]{2,12}[0-9]", fullmatch=True), max_size=2)
        ) or ["10.1038/nbt.1581"]
    if draw(st.booleans()):
        data["pmids"] = draw(
            st.lists(st.from_regex(r"[1-9][0-9]{4,8}", fullmatch=True), min_size=1, max_size=2)
        )
    return data


def _node(draw: st.DrawFn, value) -> yaml.Node:
    if isinstance(value, list):
        items = [_node(draw, v) for v in value]
        return yaml.SequenceNode("tag:yaml.org,2002:seq", items, flow_style=draw(st.booleans()))
    return yaml.ScalarNode(_STR, str(value), style=draw(st.sampled_from(_SCALAR_STYLES)))


@given(data=st.data())
def test_policy_yaml_written_any_way_loads_to_the_same_policy(data, tmp_path_factory):
    policy = data.draw(policies())
    keys = data.draw(st.permutations(list(policy)))
    root = yaml.MappingNode(
        "tag:yaml.org,2002:map",
        [(yaml.ScalarNode(_STR, k), _node(data.draw, policy[k])) for k in keys],
        flow_style=data.draw(st.booleans()),
    )
    text = yaml.serialize(root, width=data.draw(st.sampled_from([40, 80, 1000])))
    path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    assert Policy.load(path) == Policy.from_dict(policy), text


@given(data=st.data())
def test_policy_yaml_written_by_hand_loads_as_yaml_reads_it_or_is_refused_with_one_line(
    data, tmp_path_factory
):
    """Plain scalars written as they come: a title holding ``: `` is not valid plain YAML, one holding a
    comma splits in a flow list. The file loads to the policy YAML reads in it (PyYAML's safe loader), or
    is refused with ``file: key: problem`` on one line."""
    policy = data.draw(policies())
    lines = []
    for key in data.draw(st.permutations(list(policy))):
        value = policy[key]
        if isinstance(value, list) and data.draw(st.booleans()):
            lines.append(f"{key}:")
            lines += [f"{data.draw(st.sampled_from(['  ', '    ', '']))}- {v}" for v in value]
        elif isinstance(value, list):
            lines.append(f"{key}: [{', '.join(value)}]")
        else:
            lines.append(f"{key}: {value}")
    text = "\n".join(lines) + "\n"
    path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        expected = Policy.from_dict(yaml.safe_load(text), source=str(path))
    except (yaml.YAMLError, PolicyError):
        expected = None
    try:
        loaded = Policy.load(path)
    except PolicyError as exc:
        assert expected is None, text
        assert "\n" not in str(exc) and str(exc).startswith(f"{path}: "), str(exc)
    else:
        assert loaded == expected, text
