"""The plan validator: every problem, with its JSON path and step id, before anything runs.

Structure first (the pydantic models; unknown keys are errors), then meaning: unknown
functions, argument count and types, duplicate ids, variables used before every path to them
defines them, conditions that name a variable without ``{{ }}`` (``has_file``, ``$has_file``:
literal text, which would always be true) or test literal text for truth, step and depth
limits, paths that leave the workspace, http hosts not allowed, and the **commitment lint**:
a final action that writes or runs something must sit under conditions over evidence about
what it touches (a write needs a writability result for its path, a command needs to know its
program exists, reading a CSV column needs the header evidence).

Commitment findings are warnings, so the evidence of such a plan is still collected and
reported, but a plan with a finding on a final action (``ValidationResult.refusals``) cannot
succeed: the engine refuses that action and the run fails (exit 1) whether or not the action
was reached, and ``keel plan validate`` exits 1 for it too (``ValidationResult.exit_code``).
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import posixpath
import re
import shlex
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from keel.core.patchtext import patch_paths
from keel.plan._actions import ACTIONS, ActionSpec, resolve_action
from keel.plan._conditions import condition_refs, guards
from keel.plan._model import (
    Action,
    AskStep,
    Condition,
    ConditionalStep,
    EvidenceStep,
    FinalActionStep,
    Plan,
    Step,
)
from keel.plan._template import Ref, bad_templates, bare_ref, refs_in, whole_ref
from keel.probes import BindError, Param, ProbeSpec, all_names, bind, resolve, type_ok

Severity = Literal["error", "warning"]
TRUTH_OPS = frozenset({"and", "or", "not"})
"""Operators whose operands are tested for truth (a literal string there is always true)."""


@dataclass(frozen=True, slots=True)
class Issue:
    """One finding: severity, a stable code, a message, the JSON path and the step id."""

    severity: Severity
    code: str
    message: str
    path: str
    step_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "step_id": self.step_id,
        }

    def describe(self) -> str:
        """``error plan.code at $.path (step s): message``."""
        step = f" (step {self.step_id})" if self.step_id else ""
        return f"{self.severity} {self.code} at {self.path}{step}: {self.message}"


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """Budgets of one plan (keel.toml ``[limits] plan_max_steps`` / ``plan_max_depth``)."""

    max_steps: int = 10
    max_depth: int = 3


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """The plan (when its structure parsed) and every issue found."""

    plan: Plan | None
    issues: tuple[Issue, ...]
    commit_steps: frozenset[str] = frozenset()
    """The final-action steps that write or run something (the ones the engine can refuse)."""

    @property
    def errors(self) -> tuple[Issue, ...]:
        """Issues that make the plan invalid."""
        return tuple(i for i in self.issues if i.severity == "error")

    @property
    def warnings(self) -> tuple[Issue, ...]:
        """Issues that do not stop the plan (commitment findings among them)."""
        return tuple(i for i in self.issues if i.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when the plan parsed and has no errors."""
        return self.plan is not None and not self.errors

    def commitment_findings(self, step_id: str) -> tuple[Issue, ...]:
        """The commitment-lint findings about one step."""
        return tuple(
            i for i in self.issues if i.step_id == step_id and i.code.startswith("commitment.")
        )

    @property
    def refusals(self) -> tuple[Issue, ...]:
        """Commitment findings on final actions, which the engine refuses.

        A run of this plan fails (exit 1) whether or not it reaches them.
        """
        return tuple(
            i
            for i in self.issues
            if i.code.startswith("commitment.") and i.step_id in self.commit_steps
        )

    def exit_code(self, *, strict: bool = False) -> int:
        """What ``keel plan validate`` exits with; ``keel plan run`` fails the same way.

        Args:
            strict: Count every warning as an error.

        Returns:
            0 when the plan is valid and the commitment lint flags no final action; 1 when
            it is invalid, when a final action would be refused (``refusals``: ``keel plan
            run`` exits 1 for this plan too), or, with ``strict``, when there is any warning.
        """
        if not self.ok or self.refusals or (strict and self.warnings):
            return 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``valid``, ``refused`` (step ids) and the issues."""
        return {
            "valid": self.ok,
            "refused": sorted({i.step_id for i in self.refusals if i.step_id}),
            "issues": [i.to_dict() for i in self.issues],
        }


def read_plan_text(text: str | bytes) -> Any:
    """Parse plan JSON; raises ``PlanError`` (code ``plan.json``) naming line and column."""
    from keel.core.errors import PlanError

    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise PlanError(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            code="plan.json",
            line=exc.lineno,
            column=exc.colno,
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise PlanError(f"not valid JSON: {exc}", code="plan.json") from exc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def validate_plan(
    data: Any,
    *,
    limits: PlanLimits | None = None,
    workspace: Path | None = None,
    http_allow: Sequence[str] = (),
) -> ValidationResult:
    """Check a plan (parsed JSON) completely; nothing is run."""
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        return ValidationResult(None, tuple(_structure_issues(exc, data)))
    checker = _Checker(limits or PlanLimits(), workspace, tuple(http_allow))
    checker.check(plan)
    return ValidationResult(plan, tuple(checker.issues), frozenset(checker.commit_steps))


# -- structure ----------------------------------------------------------------------------


def _structure_issues(exc: ValidationError, data: Any) -> list[Issue]:
    found: dict[str, Issue] = {}
    for error in exc.errors():
        path, step_id = _json_path(data, error["loc"])
        if path in found:
            continue
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = f"unknown key {str(error['loc'][-1])!r}"
        elif error["type"] == "union_tag_invalid":
            message = (
                "unknown step type; expected evidence_collection, conditional, ask or final_action"
            )
        found[path] = Issue("error", "plan.schema", message, path, step_id)
    paths = list(found)
    keep = [p for p in paths if not any(o != p and o.startswith(p) for o in paths)]
    return [found[p] for p in keep]


def _json_path(data: Any, loc: Sequence[int | str]) -> tuple[str, str | None]:
    """``$.steps[1].true_branch[0]...`` for a pydantic ``loc`` (union tags skipped)."""
    path = "$"
    current = data
    step_id: str | None = None
    for part in loc:
        if isinstance(current, dict) and isinstance(current.get("id"), str) and "type" in current:
            step_id = current["id"]
        if isinstance(part, int) and isinstance(current, list) and part < len(current):
            path += f"[{part}]"
            current = current[part]
        elif isinstance(current, dict) and part in current:
            path += f".{part}"
            current = current[part]
        elif isinstance(current, dict) and current.get("type") == part:
            continue
        elif isinstance(part, str) and (part[:1].isupper() or "[" in part or part in _TYPES):
            continue  # a union member's name, not a place in the document
        else:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
            current = None
    if isinstance(current, dict) and isinstance(current.get("id"), str):
        step_id = current["id"]
    return path, step_id


_TYPES = {"str", "int", "float", "bool", "none", "list", "dict"}


# -- meaning ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Producer:
    step_id: str
    function: str
    args: dict[str, Any]
    returns: str


@dataclass(slots=True)
class _Scope:
    defined: frozenset[str]
    guarded: frozenset[str]


@dataclass(slots=True)
class _Checker:
    limits: PlanLimits
    workspace: Path | None
    http_allow: tuple[str, ...]
    issues: list[Issue] = field(default_factory=list[Issue])
    ids: set[str] = field(default_factory=set[str])
    ever: set[str] = field(default_factory=set[str])
    producers: dict[str, list[_Producer]] = field(default_factory=dict[str, list[_Producer]])
    names: frozenset[str] = frozenset()
    """Every variable the plan defines anywhere (``output_to``), for suggestions."""
    commit_steps: set[str] = field(default_factory=set[str])
    count: int = 0

    def error(self, code: str, message: str, path: str, step: str | None) -> None:
        self.issues.append(Issue("error", code, message, path, step))

    def warn(self, code: str, message: str, path: str, step: str | None) -> None:
        self.issues.append(Issue("warning", code, message, path, step))

    def check(self, plan: Plan) -> None:
        self.names = frozenset(_outputs(plan.steps))
        self.walk(plan.steps, "$.steps", 1, _Scope(frozenset(), frozenset()))
        if self.count > self.limits.max_steps:
            self.error(
                "plan.too_many_steps",
                f"the plan has {self.count} steps; the limit is {self.limits.max_steps}",
                "$.steps",
                None,
            )

    def walk(self, steps: Sequence[Step], base: str, depth: int, scope: _Scope) -> frozenset[str]:
        defined = scope.defined
        for index, step in enumerate(steps):
            path = f"{base}[{index}]"
            self.count += 1
            if step.id in self.ids:
                self.error(
                    "plan.duplicate_id", f"step id {step.id!r} is used twice", f"{path}.id", step.id
                )
            self.ids.add(step.id)
            if depth > self.limits.max_depth:
                self.error(
                    "plan.too_deep",
                    f"step is nested {depth} levels deep; the limit is {self.limits.max_depth}",
                    path,
                    step.id,
                )
            inner = _Scope(defined, scope.guarded)
            match step:
                case EvidenceStep():
                    self.evidence(step, path, inner)
                    defined = defined | {step.output_to}
                case ConditionalStep():
                    defined = self.conditional(step, path, depth, inner)
                case AskStep():
                    self.ask(step, path, inner)
                    defined = defined | {step.output_to}
                case FinalActionStep():
                    self.final(step, path, inner)
        return defined

    # steps

    def evidence(self, step: EvidenceStep, path: str, scope: _Scope) -> None:
        spec = self.probe(step.action, f"{path}.action", step.id)
        if spec is not None:
            bound = self.args(spec.params, step.action, f"{path}.action", step.id, spec.name)
            self.use(
                step.action.args, f"{path}.action.args", step.id, scope.defined | scope.guarded
            )
            if bound is not None and spec.reads_column:
                self.lint_column(spec, bound, path, step.id, scope.guarded)
            self.producers.setdefault(step.output_to, []).append(
                _Producer(step.id, spec.name, bound or {}, spec.returns)
            )
        self.ever.add(step.output_to)

    def conditional(
        self, step: ConditionalStep, path: str, depth: int, scope: _Scope
    ) -> frozenset[str]:
        self.condition(step.condition, f"{path}.condition", step.id)
        on_true = _Scope(scope.defined, scope.guarded | guards(step.condition, True))
        after_true = self.walk(step.true_branch, f"{path}.true_branch", depth + 1, on_true)
        on_false = _Scope(scope.defined, scope.guarded)
        after_false = self.walk(step.false_branch, f"{path}.false_branch", depth + 1, on_false)
        return after_true & after_false

    def ask(self, step: AskStep, path: str, scope: _Scope) -> None:
        known = scope.defined | scope.guarded
        self.use(step.question, f"{path}.question", step.id, known)
        if isinstance(step.choices, str):
            if whole_ref(step.choices) is None:
                self.error(
                    "plan.bad_template",
                    "choices must be a list or one {{var}}",
                    f"{path}.choices",
                    step.id,
                )
            self.use(step.choices, f"{path}.choices", step.id, known)
        self.producers.setdefault(step.output_to, []).append(_Producer(step.id, "ask", {}, "any"))
        self.ever.add(step.output_to)

    def final(self, step: FinalActionStep, path: str, scope: _Scope) -> None:
        if step.condition is not None:
            self.condition(step.condition, f"{path}.condition", step.id)
        spec = self.action(step.action, f"{path}.action", step.id)
        guard = scope.guarded | guards(step.condition, True)
        self.use(step.action.args, f"{path}.action.args", step.id, scope.defined | guard)
        if spec is None:
            return
        if spec.effect != "none":
            self.commit_steps.add(step.id)
        bound = self.args(spec.params, step.action, f"{path}.action", step.id, spec.name)
        if bound is not None and spec.effect != "none":
            self.lint_commitment(spec, bound, path, step.id, guard)

    # pieces

    def probe(self, action: Action, path: str, step: str) -> ProbeSpec | None:
        spec = resolve(action.function)
        if spec is None:
            hint = (
                " (a final action: use a final_action step)"
                if resolve_action(action.function)
                else ""
            )
            self.error(
                "plan.unknown_function",
                f"no probe called {action.function!r}{hint}"
                f"{_suggest(action.function, all_names())}",
                f"{path}.function",
                step,
            )
        return spec

    def action(self, action: Action, path: str, step: str) -> ActionSpec | None:
        spec = resolve_action(action.function)
        if spec is None:
            names = [n for a in ACTIONS for n in (a.name, *a.aliases)]
            hint = " (a probe: use an evidence_collection step)" if resolve(action.function) else ""
            self.error(
                "plan.unknown_function",
                f"no final action called {action.function!r}{hint}"
                f"{_suggest(action.function, names)}",
                f"{path}.function",
                step,
            )
        return spec

    def args(
        self, params: Sequence[Param], action: Action, path: str, step: str, name: str
    ) -> dict[str, Any] | None:
        try:
            bound = bind(params, action.args, name)
        except BindError as exc:
            where = f"{path}.args"
            if exc.kind == "arg_name" and isinstance(exc.param, str):
                where += f".{exc.param}"
            self.error(f"plan.{exc.kind}", exc.message, where, step)
            return None
        positions = {p.name: i for i, p in enumerate(params)}
        for param in params:
            if param.name not in _given(action.args, positions):
                continue
            value = bound[param.name]
            where = _arg_path(path, action.args, param.name, positions[param.name])
            self.arg(param, value, where, step, name)
        return bound

    def arg(self, param: Param, value: Any, path: str, step: str, function: str) -> None:
        if isinstance(value, str):
            for fragment in bad_templates(value):
                self.error("plan.bad_template", f"malformed template near {fragment!r}", path, step)
        ref = whole_ref(value)
        if ref is not None:
            self.ref_type(param, ref, path, step, function)
            return
        if any(True for _ in refs_in(value)):
            if param.type not in ("path", "str", "url", "any"):
                self.error(
                    "plan.arg_type",
                    f"{function}: {param.name!r} must be {param.type}, not text",
                    path,
                    step,
                )
            return
        if value is None and not param.required:
            return
        if not type_ok(param.type, value):
            self.error(
                "plan.arg_type",
                f"{function}: argument {param.name!r} must be {param.type}, "
                f"got {_json_type(value)}",
                path,
                step,
            )
            return
        if param.type == "path" and isinstance(value, str):
            self.check_path(value, path, step)
        elif param.type == "url" and isinstance(value, str):
            self.check_url(value, path, step)

    def ref_type(self, param: Param, ref: Ref, path: str, step: str, function: str) -> None:
        if ref.path or param.type == "any":
            return
        returns = {p.returns for p in self.producers.get(ref.var, [])}
        if returns and not any(_compatible(param.type, r) for r in returns):
            self.error(
                "plan.arg_type",
                f"{function}: {param.name!r} must be {param.type}, but {{{{{ref.var}}}}} is "
                f"{' or '.join(sorted(returns))}",
                path,
                step,
            )

    def check_path(self, raw: str, path: str, step: str) -> None:
        problem = outside_workspace(raw, self.workspace)
        if problem:
            self.error("plan.path_outside", problem, path, step)

    def check_url(self, raw: str, path: str, step: str) -> None:
        host = (urllib.parse.urlsplit(raw).hostname or "").lower()
        if not self.http_allow:
            self.error(
                "plan.http_not_allowed",
                "http probes are off ([probes] http_allow is empty)",
                path,
                step,
            )
        elif not any(fnmatch.fnmatchcase(host, g.lower()) for g in self.http_allow):
            self.error(
                "plan.http_not_allowed", f"host {host!r} is not in [probes] http_allow", path, step
            )

    def use(self, value: Any, path: str, step: str, known: frozenset[str]) -> None:
        if isinstance(value, str) and not path.endswith(".args"):
            for fragment in bad_templates(value):
                self.error("plan.bad_template", f"malformed template near {fragment!r}", path, step)
        for ref, where in _located_refs(value, path):
            if ref.var in known:
                continue
            if ref.var in self.ever:
                self.error(
                    "plan.maybe_undefined",
                    f"{{{{{ref.var}}}}} is not defined on every path to this step; "
                    f"guard it with a condition such as defined",
                    where,
                    step,
                )
            else:
                self.error(
                    "plan.undefined_variable",
                    f"{{{{{ref.var}}}}} is not defined by any earlier step",
                    where,
                    step,
                )

    def condition(self, cond: Condition, path: str, step: str) -> None:
        for var in sorted(condition_refs(cond)):
            if var not in self.ever:
                self.error(
                    "plan.undefined_variable",
                    f"{{{{{var}}}}} is not defined by any earlier step",
                    path,
                    step,
                )
        self.condition_shape(cond, path, step)

    def condition_shape(self, cond: Condition, path: str, step: str) -> None:
        n = len(cond.vars)
        op = cond.op
        if op == "not" and n != 1:
            self.error("plan.condition", "not takes exactly one operand", f"{path}.vars", step)
        elif op in ("and", "or", "defined", "exists") and n < 1:
            self.error("plan.condition", f"{op} needs at least one operand", f"{path}.vars", step)
        elif op not in ("and", "or", "not", "defined", "exists") and n != 2:
            self.error("plan.condition", f"{op} takes exactly two operands", f"{path}.vars", step)
        for i, item in enumerate(cond.vars):
            where = f"{path}.vars[{i}]"
            if isinstance(item, Condition):
                self.condition_shape(item, where, step)
            elif op in ("defined", "exists") and whole_ref(item) is None:
                self.error(
                    "plan.condition",
                    f"{op} takes {{{{var}}}} references{self.did_you_mean(item)}",
                    where,
                    step,
                )
            elif self.bare_operand(op, item, where, step):
                continue
            elif isinstance(item, str):
                for fragment in bad_templates(item):
                    self.error(
                        "plan.bad_template", f"malformed template near {fragment!r}", where, step
                    )
        if (
            op == "matches"
            and n == 2
            and isinstance(cond.vars[1], str)
            and whole_ref(cond.vars[1]) is None
        ):
            try:
                re.compile(cond.vars[1])
            except re.error as exc:
                self.error("plan.condition", f"bad pattern: {exc}", f"{path}.vars[1]", step)

    def bare_operand(self, op: str, item: Any, where: str, step: str) -> bool:
        """Report a variable named without ``{{ }}``, or literal text tested for truth."""
        ref = bare_ref(item)
        if ref is not None and ref.var in self.names:
            always = " (always true)" if op in TRUTH_OPS else ""
            self.error(
                "plan.bare_variable",
                f"{item!r} is literal text{always}, not the variable {ref.var!r}; "
                f'did you mean "{{{{{ref.text}}}}}"?',
                where,
                step,
            )
            return True
        if op in TRUTH_OPS and isinstance(item, str) and not any(True for _ in refs_in(item)):
            self.error(
                "plan.literal_condition",
                f"{op} tests {item!r} for truth, but it is literal text, always "
                f"{'true' if item else 'false'} whatever the evidence; an operand of {op} is "
                f'a "{{{{var}}}}" reference or a nested condition{self.did_you_mean(item)}',
                where,
                step,
            )
            return True
        return False

    def did_you_mean(self, item: Any) -> str:
        """``; did you mean "{{name}}"?`` for the plan's variables closest to ``item``."""
        if not isinstance(item, str):
            return ""
        ref = bare_ref(item)
        if ref is not None and ref.var in self.names:
            return f'; did you mean "{{{{{ref.text}}}}}"?'
        word = ref.var if ref is not None else item.strip()
        close = difflib.get_close_matches(word, sorted(self.names), n=3, cutoff=0.6)
        if not close:
            return ""
        return "; did you mean " + " or ".join(f'"{{{{{c}}}}}"' for c in close) + "?"

    # commitment lint

    def evidence_for(self, guard: Iterable[str], function: str) -> list[_Producer]:
        return [p for var in guard for p in self.producers.get(var, []) if p.function == function]

    def lint_commitment(
        self, spec: ActionSpec, bound: dict[str, Any], path: str, step: str, guard: frozenset[str]
    ) -> None:
        where = f"{path}.condition"
        if spec.effect == "write":
            targets = _write_targets(spec, bound)
            if targets is None:
                self.warn(
                    "commitment.unverifiable_target",
                    f"{spec.name} writes a path only known at run time; no evidence can cover it",
                    f"{path}.action.args",
                    step,
                )
                return
            have = {_norm(p.args.get("path")) for p in self.evidence_for(guard, "fs.writable")}
            for target in targets:
                if _norm(target) not in have:
                    self.warn(
                        "commitment.no_writable_evidence",
                        f"{spec.name} writes {target!r} but no condition over this step checks "
                        f"fs.writable({target!r})",
                        where,
                        step,
                    )
        elif spec.effect == "run":
            program = _program(bound.get("command"))
            if program is None:
                self.warn(
                    "commitment.unverifiable_target",
                    "the command is only known at run time; no evidence can cover it",
                    f"{path}.action.args",
                    step,
                )
                return
            have = {
                p.args.get("name")
                for f in ("cmd.which", "cmd.version")
                for p in self.evidence_for(guard, f)
            }
            if program not in have:
                self.warn(
                    "commitment.no_command_evidence",
                    f"the command runs {program!r} but no condition over this step checks "
                    f"cmd.which({program!r})",
                    where,
                    step,
                )

    def lint_column(
        self, spec: ProbeSpec, bound: dict[str, Any], path: str, step: str, guard: frozenset[str]
    ) -> None:
        target = bound.get("path")
        have = {_norm(p.args.get("path")) for p in self.evidence_for(guard, "parse.csv_headers")}
        if not isinstance(target, str) or _norm(target) not in have:
            self.warn(
                "commitment.no_header_evidence",
                f"{spec.name} reads a column of {target!r} but no condition over this step checks "
                f"its headers (parse.csv_headers)",
                f"{path}.action.args",
                step,
            )


def _outputs(steps: Sequence[Step]) -> Iterable[str]:
    """Every ``output_to`` in ``steps``, branches included."""
    for step in steps:
        if isinstance(step, EvidenceStep | AskStep):
            yield step.output_to
        elif isinstance(step, ConditionalStep):
            yield from _outputs(step.true_branch)
            yield from _outputs(step.false_branch)


def outside_workspace(raw: str, workspace: Path | None) -> str | None:
    """Why a literal path argument leaves the workspace, or ``None`` when it stays inside."""
    if "\x00" in raw:
        return "the path contains a NUL byte"
    if raw.startswith("~"):
        return f"{raw!r} points into a home directory"
    normal = posixpath.normpath(raw)
    if os.path.isabs(raw):
        if workspace is None:
            return f"{raw!r} is absolute; plan paths are relative to the workspace"
        root = Path(os.path.realpath(workspace))
        if not _inside(Path(os.path.realpath(raw)), root):
            return f"{raw!r} is outside the workspace"
        return None
    if normal == ".." or normal.startswith("../"):
        return f"{raw!r} climbs out of the workspace"
    if workspace is not None:
        root = Path(os.path.realpath(workspace))
        if not _inside(Path(os.path.realpath(root / raw)), root):
            return f"{raw!r} resolves (through a symlink) outside the workspace"
    return None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _norm(value: Any) -> str | None:
    if not isinstance(value, str) or whole_ref(value) is not None:
        return None
    normal = posixpath.normpath(value)
    return normal[2:] if normal.startswith("./") else normal


def _write_targets(spec: ActionSpec, bound: dict[str, Any]) -> list[str] | None:
    if spec.name == "patch.apply":
        text = bound.get("patch")
        if not isinstance(text, str) or any(True for _ in refs_in(text)):
            return None
        return patch_paths(text) or None
    target = bound.get("path")
    if not isinstance(target, str) or any(True for _ in refs_in(target)):
        return None
    return [target]


def _program(command: Any) -> str | None:
    if not isinstance(command, str) or any(True for _ in refs_in(command)):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    return posixpath.basename(words[0]) if words else None


def _compatible(param: str, returns: str) -> bool:
    if returns == "any" or param == "any":
        return True
    table = {
        "path": {"str", "str?"},
        "str": {"str", "str?"},
        "url": {"str", "str?"},
        "int": {"int"},
        "number": {"int", "number"},
        "bool": {"bool"},
        "object": {"object", "object?"},
        "list": {"list"},
    }
    return returns in table.get(param, set())


def _given(args: list[Any] | dict[str, Any], positions: dict[str, int]) -> set[str]:
    if isinstance(args, dict):
        return set(args)
    return {name for name, i in positions.items() if i < len(args)}


def _arg_path(base: str, args: list[Any] | dict[str, Any], name: str, index: int) -> str:
    return f"{base}.args.{name}" if isinstance(args, dict) else f"{base}.args[{index}]"


def _json_type(value: Any) -> str:
    from keel.probes.data import type_of

    return type_of(None, value)  # type: ignore[arg-type]


def _suggest(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def _located_refs(value: Any, path: str) -> list[tuple[Ref, str]]:
    """Each distinct variable referenced in ``value``, with the JSON path of its first use."""
    found: dict[str, tuple[Ref, str]] = {}

    def walk(item: Any, where: str) -> None:
        if isinstance(item, str):
            for ref in refs_in(item):
                found.setdefault(ref.var, (ref, where))
        elif isinstance(item, list):
            for i, sub in enumerate(item):
                walk(sub, f"{where}[{i}]")
        elif isinstance(item, dict):
            for key, sub in item.items():
                walk(sub, f"{where}.{key}")

    walk(value, path)
    return list(found.values())
