"""The matrix's consumer column: real models as attention consumers (packoracle.adapters.transformers_models),
every family × attention implementation × feed × use_cache setting, each fuzzed at the forward level (what each
output really reads) against the reference packer's rows under document isolation.

Each cell starts with a kernel control (one document alone under the implementation against eager, same
weights): a kernel numerically off on its own is "kernel off", never a leak. Then a cell is "holds", "leaks"
(the minimal counterexample; explained by the cell's examined finding or reported as unexplained), "refuses"
(the model raised on packed input: loud, which is what a user needs), "cannot run"
(the model has no such attention implementation, or the library is missing) or "needs CUDA" (kernels this
machine cannot run: bench/gpu/device_lane.sh runs them).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Union, cast

from .._fuzz import SMALL_CASES, Counterexample, fuzz
from ._render import report_link

if TYPE_CHECKING:
    from ..adapters._base import Finding
    from ..adapters.axolotl_masks import AxolotlBuilder
    from ..adapters.fla_consumers import FlaConsumer
    from ..adapters.mask_builders import MaskBuilder
    from ..adapters.transformers_models import ModelConsumer

Consumer = Union["ModelConsumer", "MaskBuilder", "FlaConsumer", "AxolotlBuilder"]
"""A cell's consumer: a model of the consumer column, another library's mask builder, or a family library's
consumer (an fla naive op, an axolotl boundary builder)."""

DEFAULT_CONSUMER_CASES = 100
POLICY = "reference"
CUDA_ONLY = ("the flash-attention 2/3 kernels", "sdpa on CUDA", "flex_attention on CUDA")
_RAISED = "the micro-batch attention consumer raised an exception:"
# The kernel control's bound on |Δ logit| between one document under an implementation and under eager (float32
# kernels differ in summation order: 1e-6 or so; bfloat16 flash kernels: 1e-2).
KERNEL_TOLERANCE = 5e-2


@dataclass
class Cell:
    consumer: Consumer                # a ModelConsumer, or a MaskBuilder
    verdict: str                      # holds | leaks | refuses | cannot run | kernel off
    detail: str = ""                  # the refusal's message, or why it cannot run
    counterexample: str = ""
    reproduce: str = ""
    seconds: float = 0.0
    cases: int = 0

    @property
    def explanation(self) -> str:
        """"explained", "unexplained" (a leak without a finding) or "stale" (a finding that no longer fails)."""
        finding = self.consumer.finding
        if self.verdict == "leaks":
            return "explained" if finding is not None and finding.invariant == "attention" else "unexplained"
        if self.verdict == "holds" and finding is not None:
            return "stale"
        return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.split(":")[0].endswith(("Error", "Exception"))]
    return (errors or lines or [""])[-1]


def run_cell(consumer: Union[ModelConsumer, MaskBuilder], cases: int, seed: int) -> Cell:
    try:
        drive = consumer.consumer()
        control = consumer.kernel_control() if hasattr(consumer, "kernel_control") else 0.0
    except Exception as e:  # the model cannot be built with this attention implementation
        return Cell(consumer, "cannot run", f"{type(e).__name__}: {str(e).splitlines()[0].split('. ')[0]}")
    if not control <= KERNEL_TOLERANCE:
        return Cell(consumer, "kernel off", f"one document alone differs from eager by {control:.2g} (a kernel "
                                            f"that is numerically off on its own: not a leak)")
    start = time.perf_counter()
    try:
        result = fuzz(None, getattr(consumer, "policy", POLICY), microbatch_consumer=drive, cases=cases, seed=seed,
                      name=consumer.name, **SMALL_CASES)
    except Counterexample as e:
        return _failed_cell(consumer, e, time.perf_counter() - start)
    return Cell(consumer, "holds", seconds=time.perf_counter() - start, cases=result.cases)


def _failed_cell(consumer: Consumer, e: Counterexample, seconds: float) -> Cell:
    """A model that raised on the minimal case refuses packed input (the headline violation is its exception:
    its last error line); any other failure leaks, shown by the report without its replay line (the page
    prints its own)."""
    from . import portable

    head = e.violations[0][1] if e.violations else ""
    if _RAISED in head:
        return Cell(consumer, "refuses", portable(_last_line(head[head.index(_RAISED):])), seconds=seconds)
    return Cell(consumer, "leaks", counterexample=portable(e.report).rstrip() + "\n", reproduce=e.reproduce,
                seconds=seconds)


def all_consumers(level: str = "forward") -> list:
    """Every cell of the column, in the matrix's order."""
    from ..adapters.transformers_models import ATTENTION, CACHE, FAMILIES, FEEDS, ModelConsumer

    # FlexAttention on the CPU runs through an inductor-compiled kernel: tens of seconds a shape, and on this
    # machine a C++ compile error on some; its cells read the BlockMask the model builds (the mask level).
    # Each feed stacked (the kit's micro-batches of one or more rows, the reference packer's rows), then one row a
    # batch as DataCollatorWithFlattening hands rows to a model, with documents split across rows.
    return [ModelConsumer(f, a, feed, cache, "mask" if a == "flex_attention" else level, one_row=one_row)
            for f, a, one_row, feed, cache in itertools.product(FAMILIES, ATTENTION, (False, True), FEEDS,
                                                                 CACHE.values())]


def run_consumers(cases: int, seed: int, selected: Callable[[str], bool] = lambda name: True,
                  progress: Optional[Callable[[str], None]] = None) -> list[Cell]:
    """Every cell whose consumer name `selected` accepts; [] when transformers or torch is missing."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return []
    cells = []
    for consumer in all_consumers():
        if not selected(consumer.name):
            continue
        cell = run_cell(consumer, cases, seed)
        cells.append(cell)
        if progress:
            rate = f", {cell.cases / cell.seconds:.0f} cases/s" if cell.cases and cell.seconds > 0 else ""
            progress(f"{consumer.name}: {cell.verdict} [{cell.seconds:.1f} s{rate}]")
    return cells


def run_family_cell(consumer: Union[FlaConsumer, AxolotlBuilder], cases: int, seed: int,
                    reproduce: Optional[str] = None) -> Cell:
    """A consumer whose library lives in a family environment (the fla naive ops, axolotl's boundary builders):
    served there by packoracle.exec_server (_served, _remote.served_command) and fuzzed from here as fuzz's
    exec_consumer, so its answers are read by the exec protocol's consumer role. With ``reproduce``, that one case,
    its Counterexample raised."""
    from . import FAMILY_TIMEOUT
    from ._envs import EnvironmentUnavailable, ensure, python_of
    from ._remote import served_command, without_machine

    try:
        venv = ensure(consumer.family)
    except EnvironmentUnavailable as e:
        return Cell(consumer, "cannot run", f"the {consumer.family} environment is not available: {e}")
    command = served_command(python_of(venv), "microbatch-consumer", consumer.name)
    start = time.perf_counter()
    try:
        result = fuzz(None, consumer.policy, exec_consumer=command, cases=cases, seed=seed, name=consumer.name,
                      timeout=FAMILY_TIMEOUT, reproduce=reproduce, **SMALL_CASES)
    except Counterexample as e:
        if reproduce is not None:
            raise
        e.report = without_machine(e.report, command)
        return _failed_cell(consumer, e, time.perf_counter() - start)
    return Cell(consumer, "holds", seconds=time.perf_counter() - start, cases=result.cases)


def family_builders() -> tuple:
    """The mask builders' section's consumers that run in a family environment (run_family_cell)."""
    from ..adapters.axolotl_masks import BUILDERS as AXOLOTL
    from ..adapters.fla_consumers import CONSUMERS

    return CONSUMERS + AXOLOTL


def replay_consumer(name: str, reproduce: str) -> None:
    """Replays a family consumer's failure of the matrix (its replay line): raises the Counterexample."""
    chosen = [c for c in family_builders() if c.name == name]
    if not chosen:
        raise KeyError(f"replay_consumer: no family consumer {name!r}; there are: "
                       f"{', '.join(c.name for c in family_builders())}")
    cell = run_family_cell(chosen[0], 1, 0, reproduce=reproduce)
    if cell.verdict == "cannot run":
        raise RuntimeError(f"replay_consumer: {name} cannot run here: {cell.detail}")


def run_builders(cases: int, seed: int, selected: Callable[[str], bool] = lambda name: True,
                 progress: Optional[Callable[[str], None]] = None) -> list[Cell]:
    """The other libraries' mask builders (packoracle.adapters.mask_builders), each under its declared policy,
    then the consumers of family environments (the fla naive ops, axolotl's boundary builders: run_family_cell)."""
    from ..adapters.mask_builders import BUILDERS

    cells = []
    for builder in BUILDERS + family_builders():
        if not selected(builder.name):
            continue
        cells.append(run_family_cell(builder, cases, seed) if getattr(builder, "family", "")
                     else run_cell(builder, cases, seed))
        if progress:
            c = cells[-1]
            progress(f"{builder.name}: {c.verdict} [{c.seconds:.1f} s]")
    return cells


def builders_table(cells: list[Cell], page: str = "docs/conformance.md", findings: Optional[_Findings] = None) -> str:
    """One line per mask builder: its call, the policy it declares, the verdict."""
    findings = findings if findings is not None else _Findings()
    out = ["| mask builder | call | declared policy | verdict |", "|---|---|---|---|"]
    for c in cells:
        b = cast("MaskBuilder", c.consumer)  # the builders' cells (run_builders)
        verdict = _cell_text(c, findings, page) + (f": {c.detail}" if c.detail else "")
        family = getattr(b, "family", "")  # a family library's consumer: served in its venv over the exec protocol
        where = f" (`{family}` environment, exec consumer)" if family else ""
        out.append(f"| {b.name} {b.written_for}{where} | `{b.call}` | `{b.policy}` | {verdict.replace('|', '/')} |")
    return "\n".join(out) + "\n"


def unexplained_cells(cells: list[Cell]) -> list[str]:
    return [f"{c.consumer.name}: {c.explanation}" for c in cells if c.explanation in ("unexplained", "stale")]


@dataclass
class _Findings:
    """The findings met, in order of first appearance, each with its stable label and the first cell it explains."""

    order: list = field(default_factory=list)
    first: dict = field(default_factory=dict)

    def add(self, cell: Cell) -> str:
        """Records the finding that explains `cell` and returns its label."""
        finding = cell.consumer.finding
        if finding not in self.first:
            self.order.append(finding)
            self.first[finding] = cell
        return self.label(finding)

    def label(self, finding: Optional[Finding]) -> str:
        """F1.. by the finding's place in transformers_models.FINDINGS (stable whatever cells run)."""
        from ..adapters.transformers_models import FINDINGS

        known = list(FINDINGS) + [f for f in self.order if f not in FINDINGS]
        return f"F{known.index(finding) + 1}"


# ---- the column as text (nothing machine-dependent: CI compares it with the committed page) -----------------

README_BEGIN = "<!-- consumers:begin (generated by `packoracle conformance`; do not edit) -->"
README_END = "<!-- consumers:end -->"


def _anchor(label: str) -> str:
    return f"consumer-{label.lower()}"


def _cell_text(cell: Optional[Cell], findings: _Findings, page: str) -> str:
    if cell is None:
        return "—"
    if cell.verdict == "leaks":
        if cell.explanation != "explained":
            return "**leaks** (UNEXPLAINED)"
        label = findings.add(cell)
        return f"**leaks** [{label}]({page}#{_anchor(label)})"
    if cell.verdict == "holds" and cell.explanation == "stale":
        return "holds (the examined finding is gone)"
    return cell.verdict


def _grouped(cells: list[Cell]) -> dict:
    """(family, attention, one_row) → feed → {use_cache: cell}, in the cells' order."""
    out: dict = {}
    for c in cells:
        k = cast("ModelConsumer", c.consumer)  # the consumer column's cells (run_consumers)
        out.setdefault((k.family, k.attention, k.one_row), {}).setdefault(k.feed, {})[k.use_cache] = c
    return out


def consumer_table(cells: list[Cell], page: str = "docs/conformance.md", findings: Optional[_Findings] = None) -> str:
    """One line per model family × attention implementation, one column per feed; each cell says what happens
    with use_cache as the model defaults it (a plain loop) · as the Trainer sets it (False)."""
    from ..adapters.transformers_models import FEEDS

    findings = findings if findings is not None else _Findings()
    if not cells:
        return "(transformers and torch are not installed: the consumer column was not run)\n"
    out = ["| model / attention | " + " | ".join(f"`{f}`" for f in FEEDS) + " |",
           "|---|" + "---|" * len(FEEDS)]
    for (family, attention, one_row), feeds in _grouped(cells).items():
        name = f"{family} / {attention}" + (", one row a batch" if one_row else "")
        whole = [c for per in feeds.values() for c in per.values()]
        if all(c.verdict == "cannot run" for c in whole):
            out.append(f"| {name} | cannot run: {whole[0].detail} |" + " |" * (len(FEEDS) - 1))
            continue
        texts = [" · ".join(_cell_text(feeds.get(f, {}).get(u), findings, page) for u in (None, False))
                 for f in FEEDS]
        out.append(f"| {name} | " + " | ".join(texts) + " |")
    out.append("")
    out.append("Each cell: `use_cache` as the model defaults it (a plain loop calling `model(**batch)`) · as the "
               "Trainer sets it (`False`). \"One row a batch\": each row fed as a batch of its own, as "
               "DataCollatorWithFlattening hands rows to a model, under `hf-flatten` with `overflow: split` (a row may "
               "start in the middle of a document, its positions going on). " + ", ".join(CUDA_ONLY) +
               ": **needs CUDA** (`bench/gpu/device_lane.sh`), not run here.")
    return "\n".join(out) + "\n"


def consumers_section(cells: list[Cell], cases: int, seed: int, builders: Optional[list] = None) -> str:
    """The page's section: the tables, the refusals, and each finding with one minimal counterexample."""
    findings = _Findings()
    table = consumer_table(cells, page="", findings=findings)
    if builders:
        table += ("\nOther libraries' mask builders, at the mask level (each called as the library's model or "
                  "dataset calls it, on the reference packer's rows under the policy it declares):\n\n" +
                  builders_table(builders, page="", findings=findings))
    cells = cells + list(builders or [])
    out = ["## Attention consumers: transformers models", "",
           f"Each cell fuzzes a tiny random-init model of the family ({cases} generated cases, seed {seed}, the "
           f"reference packer's rows under `{POLICY}`) at the forward level: which inputs each position's output "
           "really reads (gradients of the outputs with respect to the input embeddings), compared with the document "
           "mask; FlexAttention cells read the BlockMask the model hands its attention layers (the mask level: "
           "its CPU kernel is compiled by inductor, tens of seconds a shape). Feeds: "
           "`position_ids` only; with `cu_seq_lens_q/k` and `max_length_q/k`; with `seq_idx`; with an all-ones "
           "`attention_mask`; with a 0/1 padding mask; `cu_seq_lens` without `max_length`. `flash_double` is "
           "transformers' flash-attention 2 path (its own branch choices, unpadding and boundaries) with a CPU "
           "kernel double that computes what flash-attn documents (causal within each sequence it is handed); the "
           "real kernels are the device lane's. Micro-batches hold one "
           "or more rows, as the kit generates them; the rows \"one row a batch\" feed each row as a batch of its own "
           "(see below the table). A kernel control runs first (one document alone under the "
           f"implementation against eager, same weights; bound {KERNEL_TOLERANCE:g}): a kernel numerically off on "
           "its own would read \"kernel off\", never \"leaks\".", "", table]
    refusals = sorted({c.detail for c in cells if c.verdict == "refuses"})
    if refusals:
        out += ["Refusals (the model raises on packed input instead of mixing documents):", ""]
        out += [f"- `{r}`" for r in refusals] + [""]
    for finding in sorted(findings.order, key=lambda f: int(findings.label(f)[1:])):
        cell = findings.first[finding]
        k = findings.label(finding)[1:]
        explained = [c for c in cells if c.verdict == "leaks" and c.consumer.finding == finding]
        out += [f'<a id="{_anchor(f"F{k}")}"></a>', f"### F{k}: `{finding.invariant}` ({finding.kind})", "",
                f"{finding.explanation}. Upstream: {finding.upstream}.{report_link(finding)}", "",
                f"{len(explained)} cells. The minimal counterexample of `{cell.consumer.name}`:", "",
                f"Replay: `{cell.consumer.replay(cell.reproduce)}`", "", "```", cell.counterexample.rstrip(), "```",
                ""]
    unexplained = [c for c in cells if c.explanation == "unexplained"]
    for cell in unexplained:
        out += [f"### {cell.consumer.name}: not examined yet", "", "```", cell.counterexample.rstrip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"
