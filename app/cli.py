"""The ``dpwatch`` command line (Typer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    name="dpwatch",
    help="Monitor deployed differentially private mechanisms and alarm when a change breaks their claimed epsilon.",
    no_args_is_help=True,
    add_completion=False,
)


def _err(msg: str) -> None:
    typer.echo(msg, err=True)


def _fail(msg: str) -> None:
    _err(f"error: {msg}")
    raise typer.Exit(code=2)


@app.command()
def threshold(
    horizon: Annotated[int, typer.Option("--horizon", "-T", help="Horizon T (number of periods).")],
    gamma: Annotated[float, typer.Option(help="Weight γ in [0, 1/2).")] = 0.25,
    alpha: Annotated[float, typer.Option(help="False-alarm rate α over the horizon.")] = 0.05,
    replications: Annotated[Optional[int], typer.Option(help="Monte-Carlo replications; forces a fresh simulation.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Random seed of the simulation.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print the threshold q_{1-α}(T, γ) of the weighted aggregator and its Monte-Carlo standard error.

    Uses the shipped table when (T, γ, α) is on its grid and no --replications/--seed is given;
    otherwise simulates (method.md §3).
    """
    from app.stats.thresholds import DEFAULT_REPLICATIONS, DEFAULT_SEED, threshold_from_table, threshold_quantile

    try:
        est = None
        if replications is None and seed is None:
            est = threshold_from_table(horizon, gamma, alpha)
        if est is None:
            reps = replications or DEFAULT_REPLICATIONS
            last = [-1]

            def progress(done: int, total: int) -> None:
                pct = int(100 * done / total)
                if pct != last[0] and not as_json:
                    last[0] = pct
                    _err(f"\rsimulating: {done}/{total} replications ({pct}%)")

            est = threshold_quantile(horizon, gamma, alpha, reps, seed if seed is not None else DEFAULT_SEED, progress)
    except ValueError as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(est.to_dict()))
    else:
        typer.echo(
            f"q_(1-{alpha:g})(T={horizon}, gamma={gamma:g}) = {est.value:.4f}  "
            f"(Monte-Carlo s.e. {est.std_error:.4f}; {est.replications} replications, seed {est.seed}, {est.source})"
        )


@app.command()
def simulate(
    scenarios: Annotated[str, typer.Option(help="Scenario letters, e.g. 'abcdefgh' or 'a,d'.")] = "abcdefgh",
    replications: Annotated[int, typer.Option("--replications", "-R")] = 500,
    horizon: Annotated[int, typer.Option("--horizon", "-T")] = 200,
    samples: Annotated[int, typer.Option("--samples", "-n", help="Samples per side and period.")] = 200,
    change_at: Annotated[int, typer.Option(help="First period of the changed mechanism (t0).")] = 50,
    gamma: float = 0.25,
    alpha: float = 0.05,
    seed: int = 2024,
    out_dir: Annotated[Path, typer.Option(help="Where the CSV, the figure and the JSON go.")] = Path("out/simulate"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON instead of a table.")] = False,
) -> None:
    """Run the monitoring paper's scenarios (a)-(h) offline with three detectors on the same draws."""
    from app import simulation

    keys = [k for k in scenarios.replace(",", "").replace(" ", "")]
    try:
        cfg = simulation.SimulationConfig(replications, horizon, samples, change_at, gamma, alpha, seed)
        results = simulation.run(keys, cfg, progress=_err)
    except ValueError as exc:
        _fail(str(exc))
    out_dir.mkdir(parents=True, exist_ok=True)
    simulation.write_curves_csv(results, out_dir / "detection_curves.csv")
    simulation.plot_curves(results, cfg, out_dir / "detection_curves.png")
    simulation.write_json(results, cfg, out_dir / "summary.json")
    if as_json:
        typer.echo(json.dumps(simulation.to_json(results, cfg), indent=2))
    else:
        typer.echo(simulation.format_table(results, cfg))
    _err(f"wrote {out_dir / 'detection_curves.csv'}, {out_dir / 'detection_curves.png'}, {out_dir / 'summary.json'}")


def main() -> None:  # pragma: no cover
    app(sys.argv[1:])
