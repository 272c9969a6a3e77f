"""MCP tools ``ranking_check``, ``ranking_aggregate`` and ``ranking_compare``.

They use the task contract of the shared layer (``spu_common``): the same validator the grader uses, and
Spearman with average ranks for ties. All three run in the server (``instant``) with bounded inputs.
"""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import BaseModel, Field, model_validator

from tools_server.plugin import (
    FiniteOrNull,
    InputDir,
    ResultModel,
    SubmissionPath,
    ToolError,
    ToolResult,
    allowed_roots,
    hard_links_allowed,
    read_input,
    tool,
)

#: |rho| at or above which a group "follows" the presented order or a numeric condition (paper §4.2).
MONOTONE_RHO = 0.95
#: Smallest group on which the follow-the-order and monotone warnings are given.
MIN_GROUP_FOR_WARNINGS = 4
MAX_PAIRWISE_ITEMS = 25


class RankingWarning(ResultModel):
    """A shortcut a group's order takes: ``presented_order`` or ``monotone_in_condition`` (``column``)."""

    group_id: str
    kind: str
    detail: str
    column: str | None = None


class GroupCheck(ResultModel):
    group_id: str
    n: int
    ok: bool
    #: Spearman rho of the order against the presented order (null for a one-experiment group)
    presented_order_rho: FiniteOrNull = None
    condition_rhos: dict[str, float] | None = None


class CheckResult(ToolResult):
    task_id: str
    valid: bool
    strict_valid: bool
    file_errors: list[str]
    group_errors: dict[str, list[str]]
    recovered: list[str]
    #: ranking diagnostics (a group that follows the presented order ...), besides the server's own text
    warnings: list[RankingWarning | str] | None = None
    groups: list[GroupCheck]
    normalized: dict[str, Any] | None = None


class ExpectedRank(ResultModel):
    id: str
    expected_rank: float
    rank_sd: float
    p_highest: float


class AdjacentPair(ResultModel):
    lower: str
    higher: str
    p_in_this_order: float


class PairwiseMatrix(ResultModel):
    ids: list[str]
    #: P(row below column), rows and columns in ``ids`` order
    matrix: list[list[float]]


class ProxyAgreement(ResultModel):
    a: str
    b: str
    #: null when a proxy's central values are all equal (no order to compare)
    spearman: FiniteOrNull


class AggregateResult(ToolResult):
    order: list[str]
    items: list[ExpectedRank]
    adjacent_pairs: list[AdjacentPair]
    samples: int
    seed: int
    pairwise_p_below: PairwiseMatrix | None = None
    proxy_agreement: list[ProxyAgreement] | None = None


class CompareResult(ToolResult):
    n_common: int
    only_in_a: list[str]
    only_in_b: list[str]
    #: null where undefined (the values are all equal)
    spearman: FiniteOrNull
    pair_agreement: FiniteOrNull
    same_highest: bool | None


class CheckInput(BaseModel):
    task_dir: InputDir = Field(
        ..., max_length=4096, description="The task directory (the one holding contract.json)."
    )
    draft: dict[str, Any] | None = Field(
        None,
        description='The draft submission object: {"task_id", "task_version", "rankings": [{"group_id", '
        '"order": [ids lowest -> highest]}]}. Give this or draft_path.',
    )
    draft_path: SubmissionPath | None = Field(
        None, max_length=4096, description="Path of a rankings.json file to check instead."
    )

    @model_validator(mode="after")
    def _one_source(self) -> CheckInput:
        if (self.draft is None) == (self.draft_path is None):
            raise ValueError("give exactly one of draft or draft_path")
        return self


def _load_task(task_dir: str):
    from spu_common.task import TaskError, load_task

    try:  # each file read once below the allowed roots, under the tool server's path rule
        return load_task(task_dir, roots=allowed_roots(), allow_hard_links=hard_links_allowed())
    except TaskError as exc:
        raise ToolError(
            "invalid_input",
            f"cannot load the task: {exc}",
            "Pass the task directory that holds contract.json, targets.csv and instruction.md.",
        ) from None


def _follow_warnings(task, group_id: str, order: list[str]) -> tuple[GroupCheck, list[RankingWarning]]:
    from spu_common.rank_agreement import spearman_of_values

    group = task.group(group_id)
    n = len(order)
    position = {e: i for i, e in enumerate(order)}
    submitted = [position[e] for e in group.experiment_ids]
    warnings: list[RankingWarning] = []
    presented_rho = spearman_of_values(list(range(n)), submitted)
    if order == list(group.experiment_ids) and n >= 3:
        warnings.append(
            RankingWarning(
                group_id=group_id,
                kind="presented_order",
                detail="the order is exactly the presented order (contract.json / targets.csv); "
                "in SPU that scored about like chance",
            )
        )
    elif order == list(reversed(group.experiment_ids)) and n >= 3:
        warnings.append(
            RankingWarning(
                group_id=group_id,
                kind="presented_order",
                detail="the order is exactly the presented order reversed",
            )
        )
    elif n >= MIN_GROUP_FOR_WARNINGS and abs(presented_rho) >= MONOTONE_RHO:
        warnings.append(
            RankingWarning(
                group_id=group_id,
                kind="presented_order",
                detail=f"the order nearly follows the presented order (rho = {presented_rho:+.2f})",
            )
        )
    rows = {row["experiment_id"]: row for row in task.rows_of(group_id)}
    condition_rhos: dict[str, float] = {}
    for column in task.numeric_columns:
        cells = [rows[e][column] for e in order]
        if any(c is None for c in cells) or len(set(cells)) < 3:
            continue
        rho = spearman_of_values(cells, list(range(n)))
        condition_rhos[column] = round(rho, 4)
        if n >= MIN_GROUP_FOR_WARNINGS and abs(rho) >= MONOTONE_RHO:
            warnings.append(
                RankingWarning(
                    group_id=group_id,
                    kind="monotone_in_condition",
                    column=column,
                    detail=f"the order is monotone in the condition {column!r} (rho = {rho:+.2f}); "
                    "SPU excluded trivially monotone series, and agents that ranked along one "
                    "condition scored poorly",
                )
            )
    # rho is NaN for a one-experiment group (no order to compare): null
    info = GroupCheck(
        group_id=group_id,
        n=n,
        ok=True,
        presented_order_rho=round(presented_rho, 4),
        condition_rhos=condition_rhos,
    )
    return info, warnings


@tool(name="ranking_check", resource="instant", read_only=True, idempotent=True, open_world=False)
def ranking_check(args: CheckInput) -> CheckResult:
    """Check a draft rankings.json against the task contract with the grader's own rules: task identity,
    every group once, every experiment of a group exactly once (errors per group), and which known schema
    departures had to be recovered. Also warns when a group simply follows the presented order or is
    monotone (|Spearman rho| >= 0.95) in one numeric condition column of targets.csv, two shortcuts that
    scored poorly in SPU. Returns valid (after recovery), strict_valid (no recovery needed), file_errors,
    group_errors, recovered, warnings, per-group diagnostics (presented_order_rho, condition_rhos), and
    normalized (the canonical submission, when a recovery was applied)."""
    from spu_common.submission import validate_submission

    task = _load_task(args.task_dir)
    data: Any = (
        read_input(args.draft_path, kind="submission").data if args.draft_path is not None else args.draft
    )
    report = validate_submission(data, task)
    groups: list[GroupCheck] = []
    warnings: list[RankingWarning | str] = []
    for group in task.groups:
        order = report.orders.get(group.group_id)
        if order is None:
            groups.append(GroupCheck(group_id=group.group_id, n=len(group.experiment_ids), ok=False))
            continue
        info, group_warnings = _follow_warnings(task, group.group_id, order)
        groups.append(info)
        warnings.extend(group_warnings)
    return CheckResult(
        task_id=task.task_id,
        valid=report.valid,
        strict_valid=report.strict_valid,
        file_errors=report.file_errors,
        group_errors=report.group_errors,
        recovered=report.recovered,
        warnings=warnings,
        groups=groups,
        normalized=report.normalized if report.recovered else None,
    )


class Proxy(BaseModel):
    name: str = Field(..., max_length=200, description="What the proxy is, e.g. 'xTB HOMO-LUMO gap (eV)'.")
    values: dict[str, float] = Field(..., description="Proxy value per item id (its own units).")
    uncertainty: float | dict[str, float] = Field(
        0.0,
        description="Standard deviation of the proxy, in its units: one number for all items or one per "
        "item.",
    )
    weight: float = Field(1.0, ge=0, description="Relative weight of this proxy in the combination.")
    higher_means_higher: bool = Field(
        True, description="True if a larger proxy value predicts a larger measured value; False if smaller."
    )


class AggregateInput(BaseModel):
    items: list[str] | None = Field(
        None, max_length=1000, description="Item ids to rank (default: the items of the first proxy)."
    )
    proxies: list[Proxy] = Field(
        ..., min_length=1, max_length=20, description="Proxy scores with uncertainties."
    )
    samples: int = Field(4000, ge=100, le=20000, description="Monte Carlo samples.")
    seed: int = Field(0, description="Random seed (same inputs and seed give the same result).")
    combine: str = Field(
        "zscore",
        pattern="^(zscore|rank)$",
        description="'zscore': weighted sum of each proxy standardized across items; 'rank': weighted "
        "mean rank.",
    )


@tool(name="ranking_aggregate", resource="instant", read_only=True, idempotent=True, open_world=False)
def ranking_aggregate(args: AggregateInput) -> AggregateResult:
    """Combine several proxy scores, each with an uncertainty, into expected ranks by Monte Carlo: every
    sample draws each proxy from a normal distribution (mean = value, sd = uncertainty), standardizes it
    across items (or ranks it), flips its sign when a larger proxy predicts a smaller outcome, sums with
    the weights and ranks the items. Returns order (items by expected rank, lowest first: ready to submit
    as a group's order), per-item expected_rank, rank_sd and p_highest, adjacent_pairs (probability that each
    item in order ranks below the next), pairwise probabilities P(row below column) when there are at most
    25 items, and the Spearman agreement between the proxies' central values."""
    import numpy as np

    from spu_common.rank_agreement import average_ranks, spearman_of_values

    items = list(args.items) if args.items is not None else list(args.proxies[0].values)
    if len(items) < 2 or len(set(items)) != len(items):
        raise ToolError("invalid_input", "give at least two distinct item ids")
    if len(items) * args.samples > 4_000_000:
        raise ToolError(
            "too_large", f"{len(items)} items x {args.samples} samples is too many; lower samples"
        )
    n = len(items)
    rng = np.random.default_rng(args.seed)
    combined = np.zeros((args.samples, n))
    centers = []
    total_weight = sum(p.weight for p in args.proxies)
    if total_weight <= 0:
        raise ToolError("invalid_input", "at least one proxy needs a positive weight")
    for proxy in args.proxies:
        missing = [i for i in items if i not in proxy.values]
        if missing:
            raise ToolError(
                "invalid_input",
                f"proxy {proxy.name!r} has no value for {missing[:10]}",
                "Give every proxy a value for every item (or leave the item out).",
            )
        mean = np.array([proxy.values[i] for i in items], dtype=float)
        if isinstance(proxy.uncertainty, dict):
            sd = np.array([proxy.uncertainty.get(i, 0.0) for i in items], dtype=float)
        else:
            sd = np.full(n, float(proxy.uncertainty))
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))) or np.any(sd < 0):
            raise ToolError(
                "invalid_input", f"proxy {proxy.name!r}: values and uncertainties must be finite, sd >= 0"
            )
        sign = 1.0 if proxy.higher_means_higher else -1.0
        centers.append(sign * mean)
        draws = sign * (mean + sd * rng.standard_normal((args.samples, n)))
        if args.combine == "rank":
            scaled = draws.argsort(axis=1).argsort(axis=1).astype(float)
        else:
            spread = draws.std(axis=1, keepdims=True)
            scaled = np.where(
                spread > 0, (draws - draws.mean(axis=1, keepdims=True)) / np.where(spread > 0, spread, 1), 0.0
            )
        combined += (proxy.weight / total_weight) * scaled
    # rank 1 = lowest combined score; exact ties within a sample share the average rank
    ranks = (
        np.apply_along_axis(average_ranks, 1, combined)
        if n <= 50
        else combined.argsort(axis=1).argsort(axis=1) + 1.0
    )
    expected = ranks.mean(axis=0)
    order_index = sorted(range(n), key=lambda k: (expected[k], items[k]))
    order = [items[k] for k in order_index]
    highest = (ranks == ranks.max(axis=1, keepdims=True)).mean(axis=0)
    adjacent = [
        AdjacentPair(
            lower=items[a],
            higher=items[b],
            p_in_this_order=round(float((ranks[:, a] < ranks[:, b]).mean()), 4),
        )
        for a, b in itertools.pairwise(order_index)
    ]
    result = AggregateResult(
        order=order,
        items=[
            ExpectedRank(
                id=items[k],
                expected_rank=round(float(expected[k]), 3),
                rank_sd=round(float(ranks[:, k].std()), 3),
                p_highest=round(float(highest[k]), 4),
            )
            for k in order_index
        ],
        adjacent_pairs=adjacent,
        samples=args.samples,
        seed=args.seed,
    )
    if n <= MAX_PAIRWISE_ITEMS:
        below = (ranks[:, order_index][:, :, None] < ranks[:, order_index][:, None, :]).mean(axis=0)
        result.pairwise_p_below = PairwiseMatrix(ids=order, matrix=np.round(below, 3).tolist())
    if len(args.proxies) > 1:
        # a proxy whose central values are all equal has no order: its agreement is null, not NaN
        result.proxy_agreement = [
            ProxyAgreement(
                a=args.proxies[i].name,
                b=args.proxies[j].name,
                spearman=round(spearman_of_values(centers[i], centers[j]), 4),
            )
            for i in range(len(args.proxies))
            for j in range(i + 1, len(args.proxies))
        ]
    return result


class CompareInput(BaseModel):
    order_a: list[str] = Field(..., min_length=2, max_length=5000, description="First order, lowest first.")
    order_b: list[str] | None = Field(None, max_length=5000, description="Second order, lowest first.")
    values_b: dict[str, float] | None = Field(
        None, description="Or: values to compare order_a against (ties allowed, averaged ranks)."
    )

    @model_validator(mode="after")
    def _one_reference(self) -> CompareInput:
        if (self.order_b is None) == (self.values_b is None):
            raise ValueError("give exactly one of order_b or values_b")
        return self


@tool(name="ranking_compare", resource="instant", read_only=True, idempotent=True, open_world=False)
def ranking_compare(args: CompareInput) -> CompareResult:
    """Compare an order (lowest first) with a second order or with values: Spearman rho (average ranks for
    ties, as the grader scores) and pair agreement (share of item pairs placed in the same relative order,
    ignoring pairs tied in the reference), on the items both share. Use it to see how far two candidate
    rankings, or a ranking and a proxy, agree."""
    from spu_common.rank_agreement import pairs_in_order, spearman_of_order, top1_hit

    if len(set(args.order_a)) != len(args.order_a):
        raise ToolError("invalid_input", "order_a lists an item more than once")
    if args.order_b is not None:
        if len(set(args.order_b)) != len(args.order_b):
            raise ToolError("invalid_input", "order_b lists an item more than once")
        reference = {item: float(i) for i, item in enumerate(args.order_b)}
    else:
        reference = dict(args.values_b or {})
    common = [i for i in args.order_a if i in reference]
    only_a = [i for i in args.order_a if i not in reference]
    only_b = [i for i in reference if i not in set(args.order_a)]
    if len(common) < 2:
        raise ToolError("invalid_input", "the two sides share fewer than two items")
    values = {i: reference[i] for i in common}
    rho = spearman_of_order(common, values)
    pairs = pairs_in_order(common, values)
    return CompareResult(
        n_common=len(common),
        only_in_a=only_a[:50],
        only_in_b=only_b[:50],
        spearman=round(rho, 6),
        pair_agreement=round(pairs, 6),
        same_highest=top1_hit(common, values),
    )
