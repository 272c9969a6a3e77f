"""The information policy file: which source study's identifiers the detector looks for, and the mode.

JSON (or YAML) with these fields, all optional except at least one identifier::

    {
      "mode": "observe",                       # or "enforce": refuse web calls after an exposure
      "dois": ["10.1021/jacs.5b01234"],        # the source study (a DOI URL or "doi:" prefix is fine)
      "pmids": ["26012345"],
      "pmcids": ["PMC4512345"],
      "titles": ["Full title of the source study"],
      "preprint_dois": ["10.26434/chemrxiv-2021-abcde"],
      "preprint_titles": ["Title of the preprint, if different"]
    }

The singular forms ``doi``, ``pmid``, ``pmcid``, ``title``, ``preprint_doi`` and ``preprint_title`` are
accepted too (a string or a list of strings). Nothing else is: an unknown key (a misspelling, a nested
object), a key given twice (in JSON or YAML alike), a value of the wrong shape, an identifier too short to
single out one study (:data:`MIN_TITLE_WORDS`, :data:`MIN_TITLE_LETTERS`, :data:`MIN_ID_DIGITS`,
:data:`MIN_DOI_SUFFIX`: a title of one word would flag nearly every page), a title mixing scripts the way a
look-alike spelling does (``Cytochrome`` with a Cyrillic capital es; :mod:`tools_server.web.lookalike`), or
a policy naming no identifier (only ``mode``) is a :class:`PolicyError` whose text is ``file: key:
problem`` on one line, and neither ``spu serve`` nor ``spu audit serve`` starts with it (``spu audit
policy check FILE`` checks a file). The policy lives with the audit log (embedded: ``SPU_POLICY``;
service: ``--policy``) and is never shown to the agent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from spu_common.jsonfiles import loads_strict
from spu_common.yamlfiles import loads_yaml_strict
from tools_server.web.lookalike import mixed_script_problem

Mode = Literal["observe", "enforce"]
POLICY_ENV = "SPU_POLICY"

_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)
_DOI = re.compile(r"^10\.\d+/\S+$")
_WORD = re.compile(r"[^\W_]+")
#: The least a title (or preprint title) must hold: shorter ones match unrelated pages.
MIN_TITLE_WORDS = 4
MIN_TITLE_LETTERS = 20
#: The fewest digits of a PubMed or PMC id, and characters of a DOI's suffix (after the ``/``), and digits
#: of its registrant code (``10.1021``).
MIN_ID_DIGITS = 4
MIN_DOI_SUFFIX = 3
MIN_DOI_REGISTRANT = 4
#: The keys a policy file may hold (each identifier key also in its singular form).
_IDENTIFIER_KEYS = ("doi", "pmid", "pmcid", "title", "preprint_doi", "preprint_title")
_KEYS = frozenset({"mode", *_IDENTIFIER_KEYS, *(k + "s" for k in _IDENTIFIER_KEYS)})


def normalize_doi(doi: str) -> str:
    return _DOI_PREFIX.sub("", doi.strip()).strip().casefold()


@dataclass(frozen=True)
class Policy:
    mode: Mode = "observe"
    dois: tuple[str, ...] = ()
    pmids: tuple[str, ...] = ()
    pmcids: tuple[str, ...] = ()
    titles: tuple[str, ...] = ()
    preprint_dois: tuple[str, ...] = ()
    preprint_titles: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.dois
            or self.pmids
            or self.pmcids
            or self.titles
            or self.preprint_dois
            or self.preprint_titles
        )

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "policy") -> Policy:
        """The policy in ``data``, checked against the schema; :class:`PolicyError` names the key."""
        if not isinstance(data, dict):
            raise PolicyError(source, "(file)", f"must hold an object, not {type(data).__name__}")
        unknown = sorted(str(k) for k in data if k not in _KEYS)
        if unknown:
            known = ", ".join(sorted(_KEYS))
            raise PolicyError(source, unknown[0], f"unknown key (known keys: {known})")

        used: dict[str, str] = {}  # identifier key -> the spelling the file used (for error messages)

        def many(key: str) -> tuple[str, ...]:
            if key in data and key + "s" in data:
                raise PolicyError(source, key, f"give {key} or {key}s, not both")
            name = used[key] = key + "s" if key + "s" in data else key
            values = data.get(name)
            if values is None:
                return ()
            if isinstance(values, str | int) and not isinstance(values, bool):
                values = [values]
            if not isinstance(values, list) or not all(
                isinstance(v, str | int) and not isinstance(v, bool) for v in values
            ):
                raise PolicyError(source, name, "must be a string or a list of strings")
            out = tuple(str(v).strip() for v in values if str(v).strip())
            if len(out) != len(values):
                raise PolicyError(source, name, "holds an empty entry")
            return out

        def specific(key: str, values: tuple[str, ...], problem: Any) -> None:
            for index, value in enumerate(values):
                why = problem(value)
                if why:
                    raise PolicyError(source, f"{used[key]}[{index}]", why)

        mode = data.get("mode", "observe")
        if mode not in ("observe", "enforce"):
            raise PolicyError(source, "mode", f"must be 'observe' or 'enforce', not {mode!r}")
        pmids = tuple(re.sub(r"^(?:pmid:?\s*)", "", p, flags=re.IGNORECASE) for p in many("pmid"))
        bad = [p for p in pmids if not p.isdigit()]
        if bad:
            raise PolicyError(source, used["pmid"], f"PubMed ids must be digits: {bad}")
        pmcids = tuple(re.sub(r"^pmc", "", p.strip(), flags=re.IGNORECASE) for p in many("pmcid"))
        if any(not p.isdigit() for p in pmcids):
            raise PolicyError(source, used["pmcid"], "PMC ids must look like PMC1234567")
        dois = tuple(normalize_doi(d) for d in many("doi"))
        preprint_dois = tuple(normalize_doi(d) for d in many("preprint_doi"))
        for key, values in (("doi", dois), ("preprint_doi", preprint_dois)):
            if any(not _DOI.match(d) for d in values):
                raise PolicyError(source, used[key], "a DOI must look like 10.<digits>/<suffix>")
        titles, preprint_titles = many("title"), many("preprint_title")
        specific("pmid", pmids, lambda p: _too_few_digits(p, "PubMed id"))
        specific("pmcid", pmcids, lambda p: _too_few_digits(p, "PMC id"))
        specific("doi", dois, _doi_too_vague)
        specific("preprint_doi", preprint_dois, _doi_too_vague)
        specific("title", titles, _title_problem)
        specific("preprint_title", preprint_titles, _title_problem)
        policy = cls(
            mode=mode,
            dois=dois,
            pmids=pmids,
            pmcids=pmcids,
            titles=titles,
            preprint_dois=preprint_dois,
            preprint_titles=preprint_titles,
        )
        if policy.empty:
            raise PolicyError(
                source,
                "(identifiers)",
                f"the policy names no identifier, so in {mode} mode it has nothing to look for "
                "(give dois, pmids, pmcids, titles, preprint_dois or preprint_titles)",
            )
        return policy

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Policy:
        """Read and check a policy file; :class:`PolicyError` (``file: key: problem``) when it is wrong."""
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(source, "(file)", f"cannot be read: {exc}") from None
        try:
            data = loads_yaml_strict(text) if source.endswith((".yaml", ".yml")) else loads_strict(text)
        except Exception as exc:  # yaml and json errors alike: the file is not a policy
            kind = "YAML" if source.endswith((".yaml", ".yml")) else "JSON"
            # a parser's message spans lines (the mark, a caret): one line here, as every problem is
            problem = " ".join(str(exc).split())
            raise PolicyError(source, "(file)", f"is not valid {kind}: {problem}") from None
        return cls.from_dict(data, source=source)

    @classmethod
    def from_env(cls) -> Policy | None:
        path = os.environ.get(POLICY_ENV)
        return cls.load(path) if path else None


def _too_few_digits(value: str, kind: str) -> str | None:
    if len(value.lstrip("0")) < MIN_ID_DIGITS:
        return (
            f"a {kind} of fewer than {MIN_ID_DIGITS} digits is found in unrelated pages; give the study's "
            "full id"
        )
    return None


def _doi_too_vague(doi: str) -> str | None:
    registrant, _, suffix = doi.partition("/")
    if len(registrant.split(".")[1]) < MIN_DOI_REGISTRANT or len(suffix) < MIN_DOI_SUFFIX:
        return (
            f"a DOI needs a registrant code of at least {MIN_DOI_REGISTRANT} digits and a suffix of at least "
            f"{MIN_DOI_SUFFIX} characters (10.1021/jacs.5b01234); give the study's full DOI"
        )
    return None


def _title_problem(title: str) -> str | None:
    return _title_too_vague(title) or mixed_script_problem(title)


def _title_too_vague(title: str) -> str | None:
    words = _WORD.findall(title)
    letters = sum(len(w) for w in words)
    if len(words) < MIN_TITLE_WORDS or letters < MIN_TITLE_LETTERS:
        return (
            f"has {len(words)} words and {letters} letters; a title needs at least {MIN_TITLE_WORDS} words "
            f"and {MIN_TITLE_LETTERS} letters (a shorter one flags unrelated pages); give the study's full "
            "title"
        )
    return None


class PolicyError(ValueError):
    """A policy file that does not follow the schema: ``str()`` is ``file: key: problem``."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source, self.key, self.problem = source, key, problem
        super().__init__(f"{source}: {key}: {problem}")


def env_policy_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the embedded audit's policy setting must stop ``spu serve`` from starting, or None."""
    environ = os.environ if environ is None else environ
    path = environ.get(POLICY_ENV, "").strip()
    if not path:
        return None
    if environ.get("SPU_AUDIT_URL", "").strip():
        return (
            f"{path}: {POLICY_ENV}: set, but web calls go to the audit service at SPU_AUDIT_URL, which never "
            "reads it; give the policy to `spu audit serve --policy` and unset SPU_POLICY"
        )
    try:
        Policy.load(path)
    except PolicyError as exc:
        return str(exc)
    return None
