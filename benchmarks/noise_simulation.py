"""The sequential A/B (`gate ab`) under simulated noise: its error rates at both ends, its rounds
and runner minutes per tier, and the choice of the A/B design by cost per decided verdict.

The model of one round's paired log ratio d of a check: change + the offset of the block's
server pair (sd `between`) + round noise (sd `within`); checks independent (cells of a round
are in truth correlated, which helps a little). Every trial first calibrates: `--calibration-
blocks` A/A blocks drawn from the same model (from a noise 1x, 1.5x or 2x SMALLER than the
truth for the "calibration off" rows) go through gate.judge.noise (estimate_check, pool,
prior), exactly as `gate calibrate` stores them; the design (blocks at most) is sized by
gate.judge.sizing from a calibration at its expected spread, as `gate ab` sizes it; then the
A/B's rounds go through gate.judge.sequential. Reported per verdict: false fail at no change,
miss (not fail) with one check at 1.5x its threshold (the worst check), rounds and runner
minutes.

Tiers: cpu-smoke with the spreads measured on the 2-core runner (round to round: its shipped
calibration; between server pairs: the A/A means of that calibration's one pair, a rough
estimate, 1 df; `--calibration FILE` takes both, and the costs of a pair and a round, from a
calibration of blocks, pooled as `gate ab` pools it), and the GPU PR tier (a100-gemma4-26b-pr)
with ASSUMED noise, marked so.

    .venv/bin/python benchmarks/noise_simulation.py                 # about a minute
    .venv/bin/python benchmarks/noise_simulation.py --tier cpu --calibration \\
        ~/.cache/gate/noise/cpu-smoke--cpu-....yaml
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.cli.common import assignments  # noqa: E402
from gate.judge import noise as noise_mod  # noqa: E402
from gate.judge import sequential as seq  # noqa: E402
from gate.judge.ab_design import CALIBRATION_BLOCKS  # noqa: E402
from gate.judge.checks import LOWER, planned_slots  # noqa: E402
from gate.judge.sizing import Cost, Layout, Runs, Spread, draw, size, verdicts  # noqa: E402
from gate.plan.spec import load_plan  # noqa: E402

# The spread between server pairs the default cpu tier assumes: a rough figure from the A/A
# means of the shipped calibration's one pair (about one degree of freedom).
DEFAULT_BETWEEN_PCT = 2.0


@dataclass(frozen=True)
class CheckModel:
    name: str
    threshold: float  # %
    direction: str
    between: float  # sd of a server pair's offset (log)
    within: float  # sd of a round on one pair (log)


@dataclass(frozen=True)
class Tier:
    name: str
    checks: tuple[CheckModel, ...]
    servers: str  # persistent or per_round
    rounds_per_block: int
    cost: Cost
    assumed: str  # what is assumed rather than measured ("" when nothing)

    @property
    def pairs_per_block(self) -> int:
        return self.rounds_per_block if self.servers == "per_round" else 1

    def layout(self, blocks: int) -> Layout:
        return Layout(blocks, self.rounds_per_block, self.pairs_per_block)

    @property
    def design(self) -> noise_mod.CalibrationDesign:
        return noise_mod.CalibrationDesign(servers=self.servers,  # type: ignore[arg-type]
                                           rounds_per_block=self.rounds_per_block)


# ---------------------------------------------------------------- the tiers


def cpu_tier(args: argparse.Namespace) -> Tier:
    """cpu-smoke on a 2-core runner. By default the spreads of the shipped calibration (12
    rounds on one pair of the AMD EPYC class: between rounds) with `--cpu-between-pct` between
    pairs, and the costs of a pair and a round measured there; with `--calibration FILE` (a
    calibration of blocks of any runner) its spreads between pairs and between rounds and its
    measured costs. `--cpu-between-pct`, `--cpu-pair-s` and `--cpu-round-s` override one."""
    within = {"drain.req_per_min": 3.16, "sweep.c4.tpot_p50_ms": 4.96,
              "sweep.c8.tpot_p50_ms": 2.88, "ratio.c8.tpot_p50": 5.09}
    between = dict.fromkeys(within, DEFAULT_BETWEEN_PCT)
    measured = Cost(70.0, 65.0)
    if args.calibration:
        between, within, measured = _from_calibration(Path(args.calibration), "persistent",
                                                      args.rounds_per_block)
    if args.cpu_between_pct is not None:
        between = dict.fromkeys(within, args.cpu_between_pct)
    pair_s = args.cpu_pair_s or (measured.pair_s if measured else None)
    round_s = args.cpu_round_s or (measured.round_s if measured else None)
    if pair_s is None or round_s is None:
        raise SystemExit(f"{args.calibration}: no measured cost of a server pair and a round: "
                         "give --cpu-pair-s and --cpu-round-s")
    judged = plan_checks("cpu-smoke", args.threshold)
    checks = tuple(CheckModel(n, *judged[n], between[n] / 100, within[n] / 100)
                   for n in within if n in judged)
    return Tier("cpu-smoke", checks, "persistent", args.rounds_per_block,
                Cost(pair_s, round_s), "")


def plan_checks(plan_name: str, overrides: list[str] | None) -> dict[str, tuple[float, str]]:
    """Threshold (%) and bad direction of each check the plan judges, as `gate ab` would
    judge it with these `--threshold NAME=VALUE` overrides (a calibration holds more checks
    than the four the default spreads cover: TTFT and its wait, at their own thresholds)."""
    plan = load_plan(plan_name)
    thresholds = plan.thresholds.with_overrides(assignments(overrides, "--threshold"))
    return {slot.name: (slot.threshold(thresholds), slot.metric.direction)
            for slot in planned_slots(plan, thresholds)}


def gpu_tier(args: argparse.Namespace) -> Tier:
    """a100-gemma4-26b-pr: one level (64), per_round servers, ASSUMED noise and costs."""
    w, b = args.gpu_within_pct / 100, args.gpu_between_pct / 100
    checks = (CheckModel("sweep.c64.tpot_p50_ms", 10.0, LOWER, b, w),
              CheckModel("sweep.c64.tpot_p99_ms", 20.0, LOWER, b, 1.5 * w),
              CheckModel("sweep.c64.itl_p99_ms", 20.0, LOWER, b, 1.5 * w),
              CheckModel("ratio.c64.tpot_p50", 20.0, LOWER, b, w * math.sqrt(2)))
    return Tier("a100-gemma4-26b-pr", checks, "per_round", 2,
                Cost(2 * args.gpu_start_s, args.gpu_round_s, per_round_servers=True),
                f"noise assumed: {args.gpu_within_pct:g}% between rounds, "
                f"{args.gpu_between_pct:g}% between servers; a server start assumed "
                f"{args.gpu_start_s:.0f} s")


def _from_calibration(path: Path, servers: str, size_: int
                      ) -> tuple[dict, dict, Cost | None]:
    """Between-pair and round-to-round spreads (%) per check, pooled over the calibration's
    runs as `gate ab` pools them, and the newest measured cost of a pair and a round."""
    cal = noise_mod.load_calibration(path)
    design = noise_mod.CalibrationDesign(servers=servers, rounds_per_block=size_)  # type: ignore[arg-type]
    between, within = {}, {}
    for name in sorted({n for run in cal.runs for n in run.checks}):
        spread = noise_mod.pool(cal.runs, name, design).spread()
        if spread is not None:
            between[name], within[name] = 100 * spread.between, 100 * spread.within
    if not between:
        raise SystemExit(f"{path}: no blocks of {size_} rounds measured")
    return between, within, noise_mod.Noise((cal,)).cost(design)


# ---------------------------------------------------------------- calibrate, then A/B


def calibrate(rng: np.random.Generator, tier: Tier, off: float, blocks: int
              ) -> tuple[list[seq.CheckSpec], list[Spread]]:
    """Check specs whose priors come from a simulated `gate calibrate` of `blocks` blocks, its
    noise `off` times smaller than the truth, and the spreads gate ab sizes its design by."""
    specs, spreads = [], []
    for c in tier.checks:
        spread = Spread(c.between / off, c.within / off)
        d = draw(rng, spread, 0.0, 1, tier.layout(blocks))[0]
        check = noise_mod.estimate_check(c.name, [(1.0, math.exp(v)) for v in d],
                                         tier.rounds_per_block)
        run = noise_mod.CalibrationRun(provenance=noise_mod.make_provenance(),
                                       design=tier.design, checks={c.name: check})
        pooled = noise_mod.pool([run], c.name, tier.design)
        specs.append(seq.CheckSpec(c.name, c.threshold, c.direction,  # type: ignore[arg-type]
                                   pooled.prior("simulated")))
        spreads.append(pooled.spread_ucb())
    return specs, spreads


def sized(tier: Tier, specs: list[seq.CheckSpec], spreads: list[Spread], paths: int
          ) -> seq.Design:
    """The design gate ab sizes from this calibration (gate.judge.ab_design)."""
    return size(specs, spreads, tier.rounds_per_block, tier.cost, paths=paths).design


@dataclass(frozen=True)
class Scenario:
    """What the simulated A/Bs meet: the change of each check, how many A/Bs, and (the stress
    case) offsets drawn otherwise than the model's normal spread."""

    changes: list[float]
    paths: int
    offsets: object = None  # None, or offsets(rng, paths, design) -> paths x rounds
    # True: `offsets` come on top of the model's normal server offsets (stalled rounds), not
    # instead of them (offsets drawn otherwise)
    on_top: bool = False


def run_ab(rng: np.random.Generator, tier: Tier, specs: list[seq.CheckSpec], design: seq.Design,
           scenario: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Verdict codes (1 fail, -1 pass, 0 inconclusive) and rounds used of the scenario's A/Bs."""
    codes, ats = [], []
    layout = tier.layout(design.max_blocks)
    for c, spec, change in zip(tier.checks, specs, scenario.changes, strict=True):
        # badness: `change` is on the bad side whatever the check's direction
        between = c.between if scenario.offsets is None or scenario.on_top else 0.0
        b = draw(rng, Spread(between, c.within), change, scenario.paths, layout)
        if scenario.offsets is not None:
            b = b + scenario.offsets(rng, scenario.paths, design)  # type: ignore[operator]
        p = seq.run_paths(b, spec, design)
        codes.append(p.code)
        ats.append(np.where(p.at > 0, p.at, design.max_rounds + 1))
    return verdicts(Runs(np.array(codes), np.array(ats)), design.max_rounds)


@dataclass
class Row:
    false_fail: float
    miss: float
    aa_rounds: float
    miss_rounds: float
    aa_pass: float


def evaluate(tier: Tier, off: float, args: argparse.Namespace, offsets=None, on_top=False
             ) -> tuple[Row, float]:
    """Rates over `args.calibrations` simulated calibrations, each sizing its own design and
    judging `args.paths` A/Bs; and the median design's maximum rounds."""
    rng = np.random.default_rng([args.seed, int(off * 100)])
    aa_codes, aa_used, misses, miss_used, maxima = [], [], [], [], []
    for _ in range(args.calibrations):
        specs, spreads = calibrate(rng, tier, off, args.calibration_blocks)
        design = sized(tier, specs, spreads, args.sizing_paths)
        maxima.append(design.max_rounds)
        v, u = run_ab(rng, tier, specs, design,
                      Scenario([0.0] * len(specs), args.paths, offsets, on_top))
        aa_codes.append(v)
        aa_used.append(u)
        worst_miss, worst_used = -1.0, u
        for k, spec in enumerate(specs):
            changes = [0.0] * len(specs)
            changes[k] = seq.zone_for(spec.threshold_pct).theta1
            v1, u1 = run_ab(rng, tier, specs, design,
                            Scenario(changes, args.paths, offsets, on_top))
            if np.mean(v1 != 1) > worst_miss:
                worst_miss, worst_used = float(np.mean(v1 != 1)), u1
        misses.append(worst_miss)
        miss_used.append(worst_used)
    codes, used = np.concatenate(aa_codes), np.concatenate(aa_used)
    return Row(float(np.mean(codes == 1)), float(np.mean(misses)), float(np.median(used)),
               float(np.median(np.concatenate(miss_used))), float(np.mean(codes == -1))), \
        float(np.median(maxima))


def minutes(tier: Tier, rounds: float) -> float:
    blocks = math.ceil(rounds / tier.rounds_per_block)
    return blocks * tier.cost.block_s(tier.rounds_per_block) / 60.0


def tier_table(tier: Tier, args: argparse.Namespace) -> list[list]:
    rows = []
    for off in (1.0, 1.5, 2.0):
        row, most = evaluate(tier, off, args)
        rows.append(table_row("exact" if off == 1.0 else f"{off:g}x too small", tier, row, most))
    return rows


def table_row(label: str, tier: Tier, row: Row, most: float) -> list[str]:
    """One line of a tier's table (TIER_HEADERS)."""
    return [label, f"{row.false_fail:.2%}", f"{row.miss:.1%}", f"{row.aa_pass:.0%}",
            f"{row.aa_rounds:.0f}", f"{minutes(tier, row.aa_rounds):.0f}",
            f"{row.miss_rounds:.0f}", f"{most:.0f} ({minutes(tier, most):.0f} min)"]


TIER_HEADERS = ["calibration", "false fail, no change", "miss at 1.5x threshold",
                "A/A pass", "A/A rounds (median)", "A/A runner min (median)",
                "rounds at 1.5x (median)", "design: rounds at most (median)"]


# ---------------------------------------------------------------- the design choice


def design_costs(tier: Tier, args: argparse.Namespace) -> list[list]:
    """Cost per decided verdict of the A/B designs this runner could use, A/A and at 1.5x."""
    out = []
    for label, changed in _designs(tier):
        row, most = evaluate(changed, 1.0, replace_args(args, calibrations=args.calibrations // 2))
        per_decided = minutes(changed, row.aa_rounds) / max(row.aa_pass, 1e-9)
        out.append([label, f"{changed.cost.block_s(changed.rounds_per_block):.0f}",
                    f"{row.false_fail:.2%}", f"{row.miss:.1%}", f"{row.aa_pass:.0%}",
                    f"{minutes(changed, row.aa_rounds):.1f}", f"{per_decided:.1f}",
                    f"{minutes(changed, most):.0f}"])
    out.append(_no_restarts(tier, args))
    return out


def _designs(tier: Tier):
    per_round_cost = Cost(tier.cost.pair_s, tier.cost.round_s, per_round_servers=True)
    for size_ in (2, 4, 6):
        yield (f"persistent, fresh pair every {size_} rounds",
               replace(tier, rounds_per_block=size_, servers="persistent"))
    yield ("fresh pair every round (per_round), looks every 2",
           replace(tier, servers="per_round", rounds_per_block=2, cost=per_round_cost))


def _no_restarts(tier: Tier, args: argparse.Namespace) -> list:
    """The design before: one pair for the whole A/B, calibrated on one pair (its offsets in
    no interval). Cheapest per verdict; its false fails follow the offsets: as modelled, and
    with the offsets measured before the allocator fix."""
    rng = np.random.default_rng([args.seed, 99])
    design = seq.Design(2, 6, len(tier.checks))
    specs = [seq.CheckSpec(c.name, c.threshold, c.direction, seq.Prior(  # type: ignore[arg-type]
        block_sd=c.within / math.sqrt(2), block_df=11, within_sd=c.within, within_df=11,
        round_sd=c.within, round_df=11)) for c in tier.checks]
    mixture = mixture_offsets(0.10, 0.24, 0.2)
    rates, used = [], []
    for offsets in (None, mixture):
        codes, ats = [], []
        for c, spec in zip(tier.checks, specs, strict=True):
            one_pair = draw(rng, Spread(0.0 if offsets else c.between, c.within), 0.0,
                            args.calibrations * args.paths, Layout(1, design.max_rounds))
            if offsets is not None:
                whole = seq.Design(design.max_rounds, 1)
                one_pair = one_pair + offsets(rng, one_pair.shape[0], whole)
            p = seq.run_paths(one_pair, spec, design)
            codes.append(p.code)
            ats.append(np.where(p.at > 0, p.at, design.max_rounds + 1))
        v, u = verdicts(Runs(np.array(codes), np.array(ats)), design.max_rounds)
        rates.append(float(np.mean(v == 1)))
        used.append(float(np.median(u)))
    a_a = tier.cost.pair_s + used[0] * tier.cost.round_s
    return ["one pair for the whole A/B (before; offsets in no interval)",
            f"{tier.cost.pair_s:.0f} once", f"{rates[0]:.2%}; {rates[1]:.1%} with 10-24% "
            "offsets in 1 of 5 pairs", "-", "-", f"{a_a / 60:.1f}", "-", "-"]


DESIGN_HEADERS = ["design", "runner s per block", "false fail", "miss at 1.5x", "A/A pass",
                  "A/A runner min (median)", "min per decided A/A verdict", "min at most"]


def replace_args(args: argparse.Namespace, **changes) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), **changes})


# ---------------------------------------------------------------- the stress case


def mixture_offsets(low: float, high: float, share: float):
    """Offsets as measured before cpu-smoke's allocator fix: most pairs agree, `share` of them
    differ by `low`..`high` (either sign), whole blocks at a time."""
    def offsets(rng: np.random.Generator, paths: int, design: seq.Design) -> np.ndarray:
        blocks = design.max_blocks
        big = rng.random((paths, blocks)) < share
        size_ = rng.uniform(low, high, (paths, blocks)) * rng.choice([-1, 1], (paths, blocks))
        return np.repeat(np.where(big, np.log1p(size_), 0.0), design.rounds_per_block, axis=1)
    return offsets


def stress_row(tier: Tier, args: argparse.Namespace) -> list:
    """False fails when 20% of server pairs are 10-24% apart, calibrated on such pairs too."""
    spread = math.sqrt(0.2 * np.mean(np.log1p(np.linspace(0.10, 0.24, 50)) ** 2))
    stressed = replace(tier, checks=tuple(replace(c, between=spread) for c in tier.checks))
    row, most = evaluate(stressed, 1.0, args, mixture_offsets(0.10, 0.24, 0.2))
    return table_row("exact; 10-24% offsets in 1 of 5 pairs (before the allocator fix)",
                     stressed, row, most)


def stalled_rounds(share: float, low: float, high: float):
    """Heavy tails the normal model lacks: in `share` of a check's rounds one cell of one build
    stalls or races, and that round's paired ratio moves by `low`..`high` (either sign), on
    top of the normal noise. Seen on the Intel class: one base cell 24% faster than its
    neighbours, its round's ratio +27% against the others' -6%."""
    def offsets(rng: np.random.Generator, paths: int, design: seq.Design) -> np.ndarray:
        shape = (paths, design.max_rounds)
        hit = rng.random(shape) < share
        size_ = rng.uniform(low, high, shape) * rng.choice([-1, 1], shape)
        return np.where(hit, np.log1p(size_), 0.0)
    return offsets


def stalled_row(tier: Tier, args: argparse.Namespace) -> list:
    """Error rates when one round in 20 of each check holds a 15-30% outlier that the
    calibration never saw (it was measured on normal noise alone: the worse case)."""
    row, most = evaluate(tier, 1.0, args, stalled_rounds(0.05, 0.15, 0.30), on_top=True)
    return table_row("exact; a stalled cell (15-30%) in 1 of 20 rounds, none in the calibration",
                     tier, row, most)


# ---------------------------------------------------------------- main


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tier", choices=("cpu", "gpu"), action="append")
    p.add_argument("--calibrations", type=int, default=150, help="simulated calibrations")
    p.add_argument("--paths", type=int, default=20, help="A/Bs per calibration and scenario")
    p.add_argument("--sizing-paths", type=int, default=1000,
                   help="paths of each design's sizing (gate ab uses 2000)")
    p.add_argument("--calibration-blocks", type=int, default=CALIBRATION_BLOCKS)
    p.add_argument("--rounds-per-block", type=int, default=2)
    p.add_argument("--calibration", help="a schema v2 calibration file: the cpu tier's spreads")
    p.add_argument("--threshold", action="append", metavar="NAME=VALUE",
                   help="the cpu tier's thresholds as `gate ab --threshold` sets them")
    p.add_argument("--cpu-between-pct", type=float,
                   help="sd of a server pair's offset on the CPU runner, %% (default: the "
                   "calibration's; without one, 2: rough)")
    p.add_argument("--cpu-pair-s", type=float,
                   help="runner s to start, warm up and stop both cpu-smoke servers (default: "
                   "the calibration's; without one, 70)")
    p.add_argument("--cpu-round-s", type=float,
                   help="runner s of one cpu-smoke round of both builds (default: the "
                   "calibration's; without one, 65)")
    p.add_argument("--gpu-within-pct", type=float, default=2.0)
    p.add_argument("--gpu-between-pct", type=float, default=2.0)
    p.add_argument("--gpu-start-s", type=float, default=300.0, help="one server start, s")
    p.add_argument("--gpu-round-s", type=float, default=220.0, help="a round of both builds, s")
    p.add_argument("--no-design-table", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    for name in args.tier or ["cpu", "gpu"]:
        started = time.monotonic()
        tier = cpu_tier(args) if name == "cpu" else gpu_tier(args)
        spreads = ", ".join(f"{c.name} {c.between:.1%}/{c.within:.1%}" for c in tier.checks)
        print(f"\n## {tier.name}: {tier.servers} servers, blocks of {tier.rounds_per_block} "
              f"rounds, calibration of {args.calibration_blocks} blocks; spread between server "
              f"pairs / between rounds: {spreads}" + (f"; ASSUMED: {tier.assumed}"
                                                      if tier.assumed else "") + "\n")
        rows = tier_table(tier, args)
        if name == "cpu":
            rows.append(stress_row(tier, args))
            rows.append(stalled_row(tier, args))
        print(tabulate(rows, headers=TIER_HEADERS, tablefmt="github", disable_numparse=True))
        if name == "cpu" and not args.no_design_table:
            print("\nThe A/B design, by cost per decided verdict (calibration exact):\n")
            print(tabulate(design_costs(tier, args), headers=DESIGN_HEADERS, tablefmt="github",
                           disable_numparse=True))
        print(f"\n[{time.monotonic() - started:.0f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
