"""Sequential paired A/B (`gate ab`) under simulated noise: false fails, decided passes, rounds.

Each round gives, per check, the paired log ratio d = log(head/base) of two cells measured
next to each other in time. The model of d, per round:

- drain req/min and output tok/s: one drain cell, the two figures 90% correlated;
- per sweep level, the guided cell's TPOT p50, TPOT p99 and ITL p99 (50% correlated: one cell)
  and the free cell's TPOT p50 (independent);
- the structured-output overhead at levels >= 8: guided minus free TPOT p50 d of the round;
- noise normal, or Student t (`--tails DF`) scaled to the same sd;
- a slowdown s makes the guided arm (1+s) times slower: drain d - log(1+s), guided latency
  d + log(1+s) at every level, overhead + log(1+s); the free arm is untouched.

Each trial first calibrates: `--calibration-rounds` A/A rounds from the same model give each
check's prior sigma (as `gate calibrate` would, gate.judge.noise.estimate_check), worth rounds - 1
degrees of freedom. Then rounds are added one at a time and judged by gate.judge.sequential
(observe, next_action) until every check is decided, a check fails, or `--max-rounds` is spent.

Default noise (sd of d per round) is a first guess for this 2-core CPU (drain 10%, TPOT p50
8%, TPOT p99 15%, ITL p99 20%) and an assumed 2% on a GPU (3% for p99 figures); pass measured
values (`gate calibrate`) to rerun. Thresholds are the plans': drain and TPOT p50 10%; p99
not judged (cpu-smoke) or 20% (GPU plans); overhead `--overhead-pct`.

    .venv/bin/python benchmarks/noise_simulation.py                  # about a minute
    .venv/bin/python benchmarks/noise_simulation.py --cpu-tpot-pct 4 --cpu-drain-pct 5
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.judge import sequential as seq  # noqa: E402
from gate.judge.noise import FALLBACK_PRIOR_DF, estimate_check  # noqa: E402
from gate.judge.verdict import Outcome, worst  # noqa: E402
from gate.plan.spec import load_plan  # noqa: E402
from gate.plan.thresholds import CPU_RUN_NOISE_PCT, GPU_RUN_NOISE_PCT  # noqa: E402


@dataclass(frozen=True)
class Setting:
    name: str
    levels: tuple[int, ...]
    drain: float  # sd of d per round (log scale)
    tpot50: float
    tpot99: float
    itl99: float
    threshold: float  # drain and TPOT p50, %
    p99_thresholds: tuple[float, float] | None  # TPOT p99, ITL p99, %; None: not judged
    overhead_threshold: float
    fallback_pct: float  # Thresholds.run_noise_pct of this hardware kind


@dataclass(frozen=True)
class Model:
    """The checks of a setting and how to draw one round of their d values."""

    setting: Setting
    specs: tuple[tuple[str, float, str], ...]  # (name, threshold %, direction)
    sigma: np.ndarray  # true sd of d per check (for display)
    keep: tuple[int, ...] = ()  # the drawn columns that are judged checks (in specs' order)

    def draw(self, rng: np.random.Generator, rounds: int, slowdown: float, tails: float | None,
             scale: float = 1.0) -> np.ndarray:
        """rounds x checks matrix of d; `scale` multiplies the noise (mis-calibration)."""
        st, lvls = self.setting, self.setting.levels
        z = _noise(rng, (rounds, 3 + 5 * len(lvls)), tails) * scale
        eff = math.log1p(slowdown)
        cols = []
        shared = z[:, 0]
        cols.append(-eff + st.drain * (math.sqrt(0.9) * shared + math.sqrt(0.1) * z[:, 1]))
        cols.append(-eff + st.drain * (math.sqrt(0.9) * shared + math.sqrt(0.1) * z[:, 2]))
        overhead = []
        for i, level in enumerate(lvls):
            c, a, b, e, f = (z[:, 3 + 5 * i + k] for k in range(5))
            g50 = eff + st.tpot50 * (math.sqrt(0.5) * c + math.sqrt(0.5) * a)
            cols += [g50, eff + st.tpot99 * (math.sqrt(0.5) * c + math.sqrt(0.5) * b),
                     eff + st.itl99 * (math.sqrt(0.5) * c + math.sqrt(0.5) * e)]
            if level >= 8:
                overhead.append(g50 - st.tpot50 * f)
        every = np.column_stack(cols + overhead)
        return every[:, list(self.keep)] if self.keep else every


def _noise(rng: np.random.Generator, shape: tuple[int, int], tails: float | None) -> np.ndarray:
    if tails is None:
        return rng.standard_normal(shape)
    return rng.standard_t(tails, shape) / math.sqrt(tails / (tails - 2.0))


def build_model(st: Setting) -> Model:
    hi, lo = "higher_is_better", "lower_is_better"
    tails = st.p99_thresholds or (0.0, 0.0)
    specs = [("drain.req_per_min", st.threshold, hi), ("drain.output_tok_s", st.threshold, hi)]
    sig = [st.drain, st.drain]
    for level in st.levels:
        specs += [(f"sweep.c{level}.tpot_p50_ms", st.threshold, lo),
                  (f"sweep.c{level}.tpot_p99_ms", tails[0], lo),
                  (f"sweep.c{level}.itl_p99_ms", tails[1], lo)]
        sig += [st.tpot50, st.tpot99, st.itl99]
    for level in (lv for lv in st.levels if lv >= 8):
        specs.append((f"overhead.c{level}.tpot_p50", st.overhead_threshold, lo))
        sig.append(st.tpot50 * math.sqrt(2.0))
    judged = [k for k, (name, _, _) in enumerate(specs)
              if st.p99_thresholds is not None or "p99" not in name]
    return Model(st, tuple(specs[k] for k in judged), np.array(sig)[judged], tuple(judged))


@dataclass(frozen=True)
class Design:
    max_rounds: int
    confidence: float
    rho: float
    calibration_rounds: int | None  # None: no profile, the labelled fallback constant
    kind: str = "sequential"  # or "fixed" (one look after max_rounds) or "naive" (no spending)
    tails: float | None = None
    scale: float = 1.0  # true noise / calibrated noise


def _specs(model: Model, design: Design, rng: np.random.Generator) -> list[seq.CheckSpec]:
    """Check specs with priors from a simulated calibration (or the fallback constant)."""
    if design.calibration_rounds is None:
        sigma = math.sqrt(2.0) * math.log1p(model.setting.fallback_pct / 100.0)
        return [seq.CheckSpec(n, t, d, sigma, FALLBACK_PRIOR_DF) for n, t, d in model.specs]
    aa = model.draw(rng, design.calibration_rounds, 0.0, design.tails)
    out = []
    for k, (name, thr, direction) in enumerate(model.specs):
        # estimate_check takes (base, head) figures: base 1, head exp(d)
        noise = estimate_check(name, [(1.0, float(np.exp(v))) for v in aa[:, k]])
        out.append(seq.CheckSpec(name, thr, direction, noise.sigma, noise.prior_df))
    return out


def _look_outcomes(specs: list[seq.CheckSpec], d: np.ndarray, conf: float) -> list[Outcome]:
    return [seq.decide(seq.paired_interval(d[:, k], s.prior_sigma, s.prior_df, conf),
                       s.threshold_pct, s.direction) for k, s in enumerate(specs)]


@dataclass
class Tally:
    outcomes: Counter
    rounds: list[int]

    def rate(self, outcome: Outcome) -> float:
        return self.outcomes[outcome] / max(len(self.rounds), 1)


def judge_rounds(specs: list[seq.CheckSpec], d: np.ndarray, design: Design) -> tuple[Outcome, int]:
    """Judge the rounds of `d` (rounds x checks) as `design` says: (overall outcome, rounds used)."""
    k = len(specs)
    if design.kind == "fixed":
        conf = seq.look_confidence(1, 1, k, design.confidence)
        return worst(_look_outcomes(specs, d, conf)), design.max_rounds
    if design.kind == "naive":  # stop when decided, every look at the fixed design's level
        conf = seq.look_confidence(1, 1, k, design.confidence)
        for n in range(1, design.max_rounds + 1):
            outcomes = _look_outcomes(specs, d[:n], conf)
            if Outcome.FAIL in outcomes or all(o == Outcome.PASS for o in outcomes):
                break
        return worst(outcomes), n
    state = seq.start(seq.SequentialDesign(design.max_rounds, k, design.confidence, design.rho), specs)
    for n in range(1, design.max_rounds + 1):
        state = seq.observe(state, {s.name: d[:n, i] for i, s in enumerate(specs)})
        action = seq.next_action(state)
        if action.stop:
            return action.outcome, n
    raise AssertionError("next_action must stop at max_rounds")


def trial(model: Model, design: Design, slowdown: float, rng: np.random.Generator) -> tuple[Outcome, int]:
    """One A/B: calibrate, draw max_rounds rounds, judge them."""
    specs = _specs(model, design, rng)
    d = model.draw(rng, design.max_rounds, slowdown, design.tails, design.scale)
    return judge_rounds(specs, d, design)


def single_check_trials(design: Design, sigma: float, threshold: float, n: int, seed: int) -> Tally:
    """One latency check whose true change is exactly its threshold: the worst case for a false
    fail, where any inflation by optional stopping shows most."""
    rng = np.random.default_rng([seed, 7])
    tally = Tally(Counter(), [])
    effect = math.log1p(threshold / 100.0)
    for _ in range(n):
        aa = rng.normal(0.0, sigma, design.calibration_rounds or 2)
        noise = estimate_check("x", [(1.0, float(np.exp(v))) for v in aa])
        spec = seq.CheckSpec("x", threshold, "lower_is_better", noise.sigma, noise.prior_df)
        d = rng.normal(effect, sigma, (design.max_rounds, 1))
        outcome, rounds = judge_rounds([spec], d, design)
        tally.outcomes[outcome] += 1
        tally.rounds.append(rounds)
    return tally


def run_trials(model: Model, design: Design, slowdown: float, n: int, seed: int) -> Tally:
    rng = np.random.default_rng([seed, int(slowdown * 1000), n])
    tally = Tally(Counter(), [])
    for _ in range(n):
        outcome, rounds = trial(model, design, slowdown, rng)
        tally.outcomes[outcome] += 1
        tally.rounds.append(rounds)
    return tally


# ---------------------------------------------------------------- tables


SCENARIOS = (("A/A", 0.0), ("10% (at threshold)", 0.10), ("25% slower", 0.25), ("2x slower", 1.0))


def _row(label: str, t: Tally) -> str:
    r = np.array(t.rounds)
    return (f"| {label:22s} | {len(r):5d} | {t.rate(Outcome.FAIL):6.1%} | {t.rate(Outcome.PASS):6.1%} | "
            f"{t.rate(Outcome.INCONCLUSIVE):6.1%} | {np.median(r):4.0f} | {np.percentile(r, 90):4.0f} | "
            f"{np.mean(r == 1):6.1%} |")


HEAD = ("| scenario               | trials | fail   | pass   | inconcl. | rounds p50 | p90 | "
        "decided in round 1 |\n|---|---|---|---|---|---|---|---|")


def scenario_table(model: Model, design: Design, trials: int, effect_trials: int, seed: int) -> dict:
    print(HEAD)
    out = {}
    for label, s in SCENARIOS:
        t = run_trials(model, design, s, trials if s == 0.0 else effect_trials, seed)
        out[label] = t
        print(_row(label, t))
    return out


def inflation_table(model: Model, design: Design, trials: int, seed: int) -> None:
    alpha_half = (1.0 - design.confidence) / 2.0
    sigma = model.setting.tpot50
    print(f"| design | one check at its threshold: fail (bound {alpha_half:.1%}) | rounds p50 | "
          f"all checks, A/A: fail | A/A pass |\n|---|---|---|---|---|")
    for kind, label in (("sequential", f"stop when decided, spending over {design.max_rounds} looks (gate)"),
                        ("fixed", f"fixed n = {design.max_rounds}, one look"),
                        ("naive", "stop when decided, no spending (what not to do)")):
        d = replace(design, kind=kind)
        one = single_check_trials(d, sigma, model.setting.threshold, 5 * trials, seed)
        aa = run_trials(model, d, 0.0, trials, seed + 1)
        print(f"| {label} | {one.rate(Outcome.FAIL):.2%} | {np.median(one.rounds):.0f} | "
              f"{aa.rate(Outcome.FAIL):.2%} | {aa.rate(Outcome.PASS):.1%} |")


def robustness_table(model: Model, design: Design, trials: int, seed: int) -> None:
    print("| noise unlike the model | A/A false fail | at threshold: fail | A/A pass | 2x caught |\n"
          "|---|---|---|---|---|")
    cases = (("as modelled", {}), ("heavy tails (t, 4 df)", {"tails": 4.0}),
             ("true noise 1.5x the profile", {"scale": 1.5}),
             (f"no profile: fallback {model.setting.fallback_pct:g}%, {FALLBACK_PRIOR_DF:g} df",
              {"calibration_rounds": None}))
    for label, change in cases:
        d = replace(design, **change)
        aa, at = run_trials(model, d, 0.0, trials, seed), run_trials(model, d, 0.10, trials, seed + 1)
        two = run_trials(model, d, 1.0, max(trials // 4, 50), seed + 2)
        print(f"| {label} | {aa.rate(Outcome.FAIL):.2%} | {at.rate(Outcome.FAIL):.2%} | "
              f"{aa.rate(Outcome.PASS):.1%} | {two.rate(Outcome.FAIL):.1%} |")


def sigma_sweep(base: Setting, design: Design, trials: int, seed: int) -> None:
    """A/A decided-pass rate against the noise of drain and TPOT p50 (p99 figures scaled alike),
    with the design's calibration and with half as many A/A rounds behind the profile."""
    few = max(2, (design.calibration_rounds or 4) // 2)
    print(f"| sd of d: drain = TPOT p50 | A/A pass | A/A rounds p50 | A/A pass, profile of {few} "
          "rounds | 25% caught | 25% rounds p50 |\n|---|---|---|---|---|---|")
    for pct in (2, 3, 4, 5, 6, 8):
        s = pct / 100.0
        st = replace(base, drain=s, tpot50=s, tpot99=s * base.tpot99 / base.tpot50,
                     itl99=s * base.itl99 / base.tpot50)
        m = build_model(st)
        aa, slow = run_trials(m, design, 0.0, trials, seed), run_trials(m, design, 0.25, trials, seed + 1)
        aa_few = run_trials(m, replace(design, calibration_rounds=few), 0.0, trials, seed + 2)
        print(f"| {pct}% | {aa.rate(Outcome.PASS):.1%} | {np.median(aa.rounds):.0f} | "
              f"{aa_few.rate(Outcome.PASS):.1%} | {slow.rate(Outcome.FAIL):.1%} | {np.median(slow.rounds):.0f} |")


def settings(args: argparse.Namespace) -> dict[str, Setting]:
    g = args.gpu_pct / 100.0
    return {
        # cpu-smoke: its sweep levels, tails (TPOT p99, ITL p99) not judged
        "cpu": Setting("cpu", tuple(args.cpu_levels), args.cpu_drain_pct / 100,
                       args.cpu_tpot_pct / 100,
                       args.cpu_tpot99_pct / 100, args.cpu_itl99_pct / 100, args.threshold_pct,
                       None, args.overhead_pct, CPU_RUN_NOISE_PCT),
        "gpu": Setting("gpu", (1, 8, 16, 32, 64), g, g, 1.5 * g, 1.5 * g, args.threshold_pct,
                       (20.0, 20.0), args.overhead_pct, GPU_RUN_NOISE_PCT),
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=1000, help="A/A trials per setting")
    p.add_argument("--effect-trials", type=int, default=500, help="trials per slowdown scenario")
    p.add_argument("--side-trials", type=int, default=400, help="trials per row of the side tables")
    p.add_argument("--setting", choices=("cpu", "gpu"), action="append")
    p.add_argument("--max-rounds", type=int, default=6)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--rho", type=float, default=seq.DEFAULT_SPENDING_RHO, help="spending exponent")
    p.add_argument("--calibration-rounds", type=int, default=20)
    p.add_argument("--threshold-pct", type=float, default=10.0, help="drain and TPOT p50")
    p.add_argument("--overhead-pct", type=float, default=20.0, help="guided/free overhead change")
    p.add_argument("--cpu-levels", type=lambda t: [int(v) for v in t.split(",")],
                   default=load_plan("cpu-smoke").sweep.levels,
                   help="sweep levels of the cpu setting (comma-separated; default: cpu-smoke's)")
    p.add_argument("--cpu-drain-pct", type=float, default=10.0)
    p.add_argument("--cpu-tpot-pct", type=float, default=8.0)
    p.add_argument("--cpu-tpot99-pct", type=float, default=15.0)
    p.add_argument("--cpu-itl99-pct", type=float, default=20.0)
    p.add_argument("--gpu-pct", type=float, default=2.0)
    p.add_argument("--no-side-tables", action="store_true", help="only the scenario tables")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    design = Design(args.max_rounds, args.confidence, args.rho, args.calibration_rounds)
    for name in args.setting or ["cpu", "gpu"]:
        st = settings(args)[name]
        model = build_model(st)
        start = time.monotonic()
        print(f"\n## {name}: {len(model.specs)} checks, levels {list(st.levels)}, max {args.max_rounds} "
              f"rounds, {args.confidence:.0%} simultaneous, spending rho={args.rho:g}, profile from "
              f"{args.calibration_rounds} A/A rounds")
        tails = (f"p99 {st.p99_thresholds[0]:g}%, {st.p99_thresholds[1]:g}%"
                 if st.p99_thresholds else "p99 not judged")
        print(f"sd of d per round: drain {st.drain:.1%}, TPOT p50 {st.tpot50:.1%}, TPOT p99 "
              f"{st.tpot99:.1%}, ITL p99 {st.itl99:.1%}, overhead {st.tpot50 * math.sqrt(2):.1%}; "
              f"thresholds {st.threshold:g}% / {tails} / overhead {st.overhead_threshold:g}%\n")
        tallies = scenario_table(model, design, args.trials, args.effect_trials, args.seed)
        if not args.no_side_tables:
            print(f"\nOptional stopping against a fixed number of rounds (one check with the sd of TPOT "
                  f"p50: {5 * args.side_trials} trials; all checks: {args.side_trials} trials):\n")
            inflation_table(model, design, args.side_trials, args.seed + 10)
            print("\nWhen the noise is not what the model says:\n")
            robustness_table(model, design, args.side_trials, args.seed + 20)
            print("\nA/A decided passes against the noise (other figures scaled alike):\n")
            sigma_sweep(st, design, args.side_trials // 2, args.seed + 30)
        aa = tallies["A/A"]
        print(f"\n{name}: A/A false fails {aa.outcomes[Outcome.FAIL]} of {len(aa.rounds)} "
              f"({aa.rate(Outcome.FAIL):.2%}; requirement <= 1%)  [{time.monotonic() - start:.0f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
