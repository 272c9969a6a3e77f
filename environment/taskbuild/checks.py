"""Author warnings of a built task: what an author should look at before publishing it.

Orders that follow one setup field exactly, ties, adjacent values within the stated noise band, a
presented order that already is the measured one, identifiers of the source (DOI, title words, author
surnames, data-set names) in agent-visible text, formula-like cells, a citation without a title, unused
rows."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from environment.prior_screen import prior_warnings
from environment.taskbuild.card import Assessment, presented_order_problem
from environment.taskbuild.problems import AuthorWarning
from environment.taskbuild.render import Rendered
from environment.taskbuild.spec import Spec, SpecGroup
from spu_common.contract import looks_like_formula, parse_number
from spu_common.rank_agreement import average_ranks

#: A run of this many consecutive words of the study's title in agent-visible text is reported.
TITLE_RUN = 4

_STOPWORDS_TEXT = (
    "a an and the of in on at for to from by with without into via as or is are be its their this "
    "that between among using under over than study studies"
)
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_NOT_SURNAMES_TEXT = (
    "And The Et Al Journal Table Supplementary Press University Edition Handbook Vol Chem Phys Soc Am "
    "Nat Nature Science Proc Natl Acad Sci Commun Lett Rev Biochem Biol Mol Des Data Comput Aided Med "
    "Org Inorg Anal Int Acta Angew Ed Eng Res Mater Appl Eur Phys Ind Bioorg Pharm Rep Sci"
)
_NOT_SURNAMES = frozenset(_NOT_SURNAMES_TEXT.split())
_GENERIC_TOKENS_TEXT = (
    "csv tsv pdf xlsx xls txt json html doi url api pdb pka pkb logp logd ph kcat km si table row "
    "rows file files version data set dataset supplementary information"
)
_GENERIC_TOKENS = frozenset(_GENERIC_TOKENS_TEXT.split())
_DOI_RE = re.compile(r"\b10\.\d{4,9}/[^\s,;\"'<>]+", re.IGNORECASE)
_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['\u2019-][A-Za-z0-9]+)*")


def _title_of(citation: str | dict[str, Any]) -> str:
    if isinstance(citation, dict):
        return str(citation.get("title") or "")
    match = re.search(r"[\"\u201c\u201d]([^\"\u201c\u201d]{8,})[\"\u201c\u201d]", citation) or re.search(
        r"(?:^|[\s,(])['\u2018]([^'\u2018\u2019]{8,}?)['\u2019](?=[\s,.;)]|$)", citation
    )
    return match.group(1) if match else ""


def _surnames(citation: str | dict[str, Any]) -> list[str]:
    if isinstance(citation, dict):
        authors = citation.get("authors") or []
        authors = authors if isinstance(authors, list) else re.split(r";|,| and ", str(authors))
        names = []
        for author in authors:
            words = [w for w in _WORD_RE.findall(str(author)) if len(w) > 1 or not w.isupper()]
            # "Surname, Given" or "Given Surname": take the longest capitalised word without a dot
            if "," in str(author):
                words = words[:1]
            elif words:
                words = words[-1:]
            names += words
        return sorted({n for n in names if len(n) >= 2})
    found: set[str] = set()
    patterns = (
        r"\b([A-Z][\w'\u2019-]+),?\s+(?:[A-Z]\.?-?\s?){1,3}(?=[,;.]|\s|$)",  # Surname DL / Surname, D. L.
        r"(?:\b[A-Z]\.\s?(?:-?[A-Z]\.\s?)*)([A-Z][\w'\u2019-]+)",  # D. L. Surname
        r"\b([A-Z][\w'\u2019-]+)\s+et\s+al\b",  # Surname et al
    )
    for pattern in patterns:
        for match in re.finditer(pattern, citation):
            name = match.group(1).strip("'\u2019-")
            if len(name) >= 2 and name not in _NOT_SURNAMES and not name.isupper():
                found.add(name)
    return sorted(found)


def _source_tokens(text: str) -> list[str]:
    tokens: set[str] = set()
    for url in re.findall(r"https?://[^\s,;)]+", text):
        tokens.add(url.rstrip("."))
    for word in re.findall(r"[A-Za-z0-9][\w.-]*[A-Za-z0-9]", text):
        if word.lower() in _GENERIC_TOKENS or _DOI_RE.fullmatch(word):
            continue
        mixed = re.search(r"[a-z][A-Z]", word) and len(word) >= 4  # FreeSolv, PubChem, ChEMBL
        acronym = word.isupper() and word.isalpha() and len(word) >= 3  # NIST, ESOL
        filename = re.fullmatch(r"[\w-]+\.(?:csv|tsv|txt|xlsx?|json|sdf|zip|pdf|dat)", word, re.IGNORECASE)
        ident = re.search(r"[A-Za-z]", word) and re.search(r"\d", word) and len(word) >= 5  # SAMPL6, v0.52x
        if mixed or acronym or filename or ident:
            tokens.add(word)
    return sorted(tokens)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(text)]


def source_identifiers(spec: Spec) -> list[tuple[str, str]]:
    """(kind, text) of every identifier of the source the agent must not see."""
    out: list[tuple[str, str]] = []
    citation_text = spec.citation_text
    for doi in sorted(set(_DOI_RE.findall(citation_text + " " + spec.data_source))):
        out.append(("DOI", doi.rstrip(".)")))
    title = _title_of(spec.citation)
    words = _words(title)
    # a run the author put in the task's own title on purpose (the target's name: "protein tyrosine
    # phosphatase 1b") is the task's subject, not a pointer to the study
    own_title = " " + " ".join(_words(spec.title)) + " "
    for i in range(len(words) - TITLE_RUN + 1):
        gram = words[i : i + TITLE_RUN]
        if sum(w not in _STOPWORDS for w in gram) >= 2 and f" {' '.join(gram)} " not in own_title:
            out.append(("title words", " ".join(gram)))
    out += [("author surname", name) for name in _surnames(spec.citation)]
    out += [("data source", tok) for tok in _source_tokens(spec.data_source)]
    return list(dict.fromkeys(out))


def _find(kind: str, term: str, text: str, words_joined: str) -> bool:
    if kind == "title words":
        return f" {term} " in words_joined
    if kind == "author surname":
        return re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", text) is not None
    return re.search(rf"(?<![\w.-]){re.escape(term)}(?![\w-])", text, re.IGNORECASE) is not None


def _spearman(x: list[float], y: list[float]) -> float:
    import numpy as np

    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(np.sqrt((rx @ rx) * (ry @ ry)))
    return float(rx @ ry) / denom if denom > 0 else 0.0


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def author_checks(spec: Spec, rendered: Rendered, assessment: Assessment) -> list[AuthorWarning]:
    """The warnings an author should look at before publishing a task built from ``spec`` (``assessment``:
    its chance figures and screen, :func:`environment.taskbuild.card.assess`)."""
    built_of = {author: new for new, author in rendered.group_map.items()}
    warnings: list[AuthorWarning] = []
    for group in spec.groups:
        warnings += _group_warnings(spec, group, built_of.get(group.group_id))
    warnings += _presented_in_order(spec, rendered)
    warnings += _source_warnings(spec, rendered)
    threshold = assessment.chance["chance_threshold"]
    warnings += [AuthorWarning(*w) for w in prior_warnings(assessment.screen, threshold)]
    warnings += _presented_order(assessment)
    warnings += _cell_warnings(spec)
    if not _title_of(spec.citation):
        warnings.append(
            AuthorWarning(
                "no-title",
                "the citation has no title (a citation mapping's 'title', or the title in quotes), so the "
                "check for the study's title words in agent-visible text cannot run",
            )
        )
    if spec.unused_keys and spec.design is None:  # a design draws from the rows: the rest are its pool
        warnings.append(
            AuthorWarning(
                "unused-rows",
                f"{len(spec.unused_keys)} row(s) of {spec.experiments_file} are in no group "
                "and are left out: "
                + ", ".join(spec.unused_keys[:10])
                + (" ..." if len(spec.unused_keys) > 10 else ""),
            )
        )
    return warnings


def _group_warnings(spec: Spec, group: SpecGroup, built: str | None) -> list[AuthorWarning]:
    gid = group.group_id
    rows = [spec.rows[k] for k in group.members]
    values = [r.value for r in rows]
    warnings: list[AuthorWarning] = []
    for name in spec.setup_fields:
        numbers = [parse_number(r.cells[name]) for r in rows]
        if any(n is None for n in numbers) or len(set(numbers)) < 2:
            continue
        rho = _spearman(numbers, values)
        if abs(abs(rho) - 1.0) < 1e-9:
            warnings.append(
                AuthorWarning(
                    "follows-one-field",
                    f"the measured order follows the setup field {name!r} exactly "
                    f"(Spearman rho = {rho:+.0f} over {len(rows)} experiments): ranking by that field "
                    "alone scores 1",
                    gid,
                    built,
                )
            )
    by_value = sorted(rows, key=lambda r: r.value)
    ties: dict[float, list[str]] = {}
    for r in by_value:
        ties.setdefault(r.value, []).append(r.key)
    for value, keys in ties.items():
        if len(keys) > 1:
            message = f"{', '.join(keys)} share the value {_fmt(value)} (tied values share average ranks)"
            warnings.append(AuthorWarning("tie", message, gid, built))
    if spec.noise_band is not None:
        close = [(a, b) for a, b in itertools.pairwise(by_value) if 0 < b.value - a.value < spec.noise_band]
        if close:
            pairs = "; ".join(f"{a.key} ({_fmt(a.value)}) and {b.key} ({_fmt(b.value)})" for a, b in close)
            message = (
                f"{len(close)} adjacent pair(s) closer than the noise band {_fmt(spec.noise_band)} "
                f"{group.unit}: {pairs}"
            )
            warnings.append(AuthorWarning("within-noise", message, gid, built))
    return warnings


def _presented_in_order(spec: Spec, rendered: Rendered) -> list[AuthorWarning]:
    warnings = []
    for built in json.loads(rendered.files["contract.json"])["groups"]:
        ids = built["experiment_ids"]
        values = [spec.rows[rendered.id_map[e]].value for e in ids]
        if len(ids) >= 3 and _spearman(list(range(len(ids))), values) > 1 - 1e-9:
            warnings.append(
                AuthorWarning(
                    "presented-in-order",
                    "the shuffled order shown to the agent is already the measured order: submitting it "
                    "unchanged scores 1 (raise task_version to draw another order)",
                    rendered.group_map[built["group_id"]],
                    built["group_id"],
                )
            )
    return warnings


def _presented_order(assessment: Assessment) -> list[AuthorWarning]:
    """A presented order above chance that the build let through (``--allow-presented-order``)."""
    problem = presented_order_problem(assessment)
    if problem is None:
        return []
    return [
        AuthorWarning(
            "presented-order",
            f"{problem.message}; written only because --allow-presented-order was given (raise "
            "task_version to draw another order)",
        )
    ]


def _source_warnings(spec: Spec, rendered: Rendered) -> list[AuthorWarning]:
    warnings = []
    identifiers = source_identifiers(spec)
    for name, text in sorted(rendered.agent_text().items()):
        joined = " " + " ".join(_words(text)) + " "
        for kind, term in identifiers:
            if _find(kind, term, text, joined):
                warnings.append(
                    AuthorWarning("source-identifier", f"{kind} {term!r} of the source appears in {name}")
                )
        for doi in sorted(set(_DOI_RE.findall(text))):
            known = any(
                kind == "DOI" and term.lower() == doi.rstrip(".)").lower() for kind, term in identifiers
            )
            if not known:
                warnings.append(AuthorWarning("source-identifier", f"a DOI ({doi}) appears in {name}"))
    return warnings


def _cell_warnings(spec: Spec) -> list[AuthorWarning]:
    cells = [
        f"{row.key}.{name}"
        for row in spec.rows.values()
        for name in spec.setup_fields
        if looks_like_formula(row.cells[name])
    ]
    if not cells:
        return []
    shown = ", ".join(cells[:10]) + (" ..." if len(cells) > 10 else "")
    return [
        AuthorWarning(
            "formula-like-cell",
            f"{len(cells)} setup cell(s) start like a spreadsheet formula ({shown}); targets.csv writes them "
            "with a leading apostrophe so a spreadsheet shows them as text",
        )
    ]


def notes(spec: Spec) -> list[str]:
    """Things the checks could not look at (not warnings)."""
    return ["no noise_band given: the within-noise check was skipped"] if spec.noise_band is None else []
