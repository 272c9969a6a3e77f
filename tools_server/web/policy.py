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
accepted too. The policy lives with the audit log (embedded: ``SPU_POLICY``; service: ``--policy``) and is
never shown to the agent.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Mode = Literal["observe", "enforce"]
POLICY_ENV = "SPU_POLICY"

_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)


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
    def from_dict(cls, data: dict) -> Policy:
        def many(key: str) -> tuple[str, ...]:
            values = data.get(key + "s", data.get(key))
            if values is None:
                return ()
            if isinstance(values, (str, int)):
                values = [values]
            return tuple(str(v).strip() for v in values if str(v).strip())

        mode = data.get("mode", "observe")
        if mode not in ("observe", "enforce"):
            raise ValueError(f"policy mode must be 'observe' or 'enforce', not {mode!r}")
        pmids = tuple(re.sub(r"^(?:pmid:?\s*)", "", p, flags=re.IGNORECASE) for p in many("pmid"))
        bad = [p for p in pmids if not p.isdigit()]
        if bad:
            raise ValueError(f"PubMed ids must be digits: {bad}")
        pmcids = tuple(re.sub(r"^pmc", "", p.strip(), flags=re.IGNORECASE) for p in many("pmcid"))
        if any(not p.isdigit() for p in pmcids):
            raise ValueError("PMC ids must look like PMC1234567")
        return cls(
            mode=mode,
            dois=tuple(normalize_doi(d) for d in many("doi")),
            pmids=pmids,
            pmcids=pmcids,
            titles=many("title"),
            preprint_dois=tuple(normalize_doi(d) for d in many("preprint_doi")),
            preprint_titles=many("preprint_title"),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Policy:
        text = Path(path).read_text(encoding="utf-8")
        if str(path).endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("the policy file must hold an object")
        return cls.from_dict(data)

    @classmethod
    def from_env(cls) -> Policy | None:
        path = os.environ.get(POLICY_ENV)
        return cls.load(path) if path else None
