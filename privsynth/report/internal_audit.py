"""Accuracy audit: how closely a synthetic table matches the real one, on the same discretisation.

The audit reads the real rows, so NOTHING it produces is differentially private: its figures,
tables and plots are internal diagnostics for the data owner and must never be published alongside
the release. Every output carries ``"visibility": "internal"`` and says so in plain words.

All comparisons are on level codes (n x attributes int arrays over one ``Domain``), as proportions,
so tables of different sizes compare directly.
"""

from __future__ import annotations

import base64
import io
import os
import re
from pathlib import Path

import numpy as np
from scipy import optimize, sparse

from privsynth.schema import Schema
from privsynth.schema.encoding import Domain, domain_of
from privsynth.schema.workload import Marginal, all_marginals, marginal_counts, random_marginals

NOT_PRIVATE_NOTICE = (
    "INTERNAL: this audit reads the real data and is NOT differentially private. "
    "Do not publish it or any figure from it alongside the synthetic release."
)


def _check_codes(codes: np.ndarray, domain: Domain, what: str) -> np.ndarray:
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != domain.n_attributes:
        raise ValueError(f"{what}: expected a 2-d code array with {domain.n_attributes} columns, got shape "
                         f"{codes.shape}")
    if codes.shape[0] == 0:
        raise ValueError(f"{what}: needs at least one row to form marginal distributions")
    if codes.dtype.kind not in "iu":
        raise ValueError(f"{what}: codes must be integers, got dtype {codes.dtype}")
    sizes = np.asarray(domain.sizes)
    if (codes < 0).any() or (codes >= sizes).any():
        raise ValueError(f"{what}: codes fall outside the domain's levels")
    # Column-major int64 makes the per-marginal column reads and index arithmetic contiguous (~1.5x faster).
    return np.asfortranarray(codes, dtype=np.int64)


def audit_marginals(n_attributes: int, k: int, max_marginals: int | None, seed: int) -> list[Marginal]:
    """The k-way marginals the audit compares: all of them, or a seeded uniform subset (data-free)."""
    if max_marginals is None:
        return all_marginals(n_attributes, k)
    if max_marginals < 1:
        raise ValueError(f"max_marginals must be at least 1 or None, got {max_marginals}")
    # Offset the seed by k so each order draws an independent subset.
    return random_marginals(n_attributes, k, max_marginals, seed + k)


def marginal_error_summary(
    real_codes: np.ndarray,
    synthetic_codes: np.ndarray,
    domain: Domain,
    ks: tuple[int, ...] = (1, 2, 3),
    max_marginals: int | None = None,
    seed: int = 0,
) -> dict:
    """Per marginal order k: mean and max total-variation distance between real and synthetic marginal
    distributions, and the max absolute cell error (on proportions), over every k-way marginal or a
    seeded random subset of ``max_marginals``.

    Returns ``{str(k): {"mean_tv", "max_tv", "max_abs_cell_error", "n_marginals", "worst_marginal",
    "independent_mean_tv", "independent_max_tv"}}``: ``worst_marginal`` names the columns of the
    largest error, and the ``independent_*`` figures are the yardstick, the product of the real 1-way
    marginals scored the same way (a release that does not beat it has learnt no dependence). Orders
    larger than the number of attributes are skipped. Reads the real data: NOT differentially private.
    """
    real = _check_codes(real_codes, domain, "real_codes")
    synth = _check_codes(synthetic_codes, domain, "synthetic_codes")
    n_real, n_synth = real.shape[0], synth.shape[0]
    out: dict[str, dict] = {}
    for k in ks:
        k = int(k)
        if k < 1:
            raise ValueError(f"marginal orders must be positive, got {k}")
        if k > domain.n_attributes:
            continue
        marginals = audit_marginals(domain.n_attributes, k, max_marginals, seed)
        tvs = np.empty(len(marginals))
        independent = np.empty(len(marginals))
        max_cell = 0.0
        one_way = [marginal_counts(real, domain, (a,)) / n_real for a in range(domain.n_attributes)]
        for i, m in enumerate(marginals):
            real_m = marginal_counts(real, domain, m) / n_real
            diff = real_m - marginal_counts(synth, domain, m) / n_synth
            abs_diff = np.abs(diff)
            tvs[i] = 0.5 * abs_diff.sum()
            max_cell = max(max_cell, float(abs_diff.max()))
            product = one_way[m[0]]
            for a in m[1:]:
                product = np.multiply.outer(product, one_way[a]).ravel()
            independent[i] = 0.5 * float(np.abs(real_m - product).sum())
        worst = int(np.argmax(tvs))
        out[str(k)] = {
            "mean_tv": float(tvs.mean()),
            "max_tv": float(tvs.max()),
            "max_abs_cell_error": max_cell,
            "n_marginals": len(marginals),
            "worst_marginal": [domain.names[a] for a in marginals[worst]],
            "independent_mean_tv": float(independent.mean()),
            "independent_max_tv": float(independent.max()),
        }
    return out


# ---------------------------------------------------------------- per-column distributions and plots

def column_distributions(real_codes: np.ndarray, synthetic_codes: np.ndarray, schema: Schema) -> dict:
    """Per kept column: level labels, real and synthetic proportions, and their TV distance.

    Returns ``{name: {"labels", "real", "synthetic", "tv"}}`` in schema order (plain lists and floats).
    Reads the real data: NOT differentially private.
    """
    domain = domain_of(schema)
    real = _check_codes(real_codes, domain, "real_codes")
    synth = _check_codes(synthetic_codes, domain, "synthetic_codes")
    out: dict[str, dict] = {}
    for a, col in enumerate(schema.kept_columns):
        size = domain.sizes[a]
        p = np.bincount(real[:, a], minlength=size) / real.shape[0]
        q = np.bincount(synth[:, a], minlength=size) / synth.shape[0]
        out[col.name] = {
            "labels": list(col.labels),
            "real": [float(x) for x in p],
            "synthetic": [float(x) for x in q],
            "tv": float(0.5 * np.abs(p - q).sum()),
        }
    return out


_MAX_LABEL_CHARS = 18


def _short_label(label: str) -> str:
    return label if len(label) <= _MAX_LABEL_CHARS else label[: _MAX_LABEL_CHARS - 1] + "\u2026"


def _plot_file_name(index: int, name: str) -> str:
    # Index prefix keeps names unique when sanitising maps two column names to the same string.
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "column"
    return f"{index:02d}_{safe[:60]}.png"


def plot_columns(distributions: dict, out_dir: str | Path) -> list[Path]:
    """One small PNG per column: grouped bars of real vs synthetic proportions; returns the paths.

    Uses matplotlib's Agg canvas directly (no pyplot), so it touches no global backend state and is
    safe in worker threads.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from privsynth.io import atomic_write_bytes

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # pictures of the real data: owner-only
    paths: list[Path] = []
    for index, (name, dist) in enumerate(distributions.items()):
        labels = [_short_label(str(x)) for x in dist["labels"]]
        n = len(labels)
        x = np.arange(n)
        width = min(12.0, max(4.0, 0.28 * n + 1.5))
        many = n > 6 or any(len(lbl) > 8 for lbl in labels)
        fig = Figure(figsize=(width, 3.6 if many else 3.0), dpi=72)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        ax.bar(x - 0.2, dist["real"], width=0.4, label="real", color="#4c72b0")
        ax.bar(x + 0.2, dist["synthetic"], width=0.4, label="synthetic", color="#dd8452")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=90 if many else 0, fontsize=7 if n > 20 else 8)
        ax.set_xlim(-0.6, n - 0.4)
        ax.set_ylabel("proportion")
        ax.set_title(f"{name}  (TV {dist['tv']:.3f})", fontsize=10)
        ax.legend(fontsize=8, frameon=False)
        fig.tight_layout()
        path = out_dir / _plot_file_name(index, name)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        atomic_write_bytes(path, buffer.getvalue(), private=True)  # created 0600, never chmod-narrowed
        paths.append(path)
    return paths


# ---------------------------------------------------------------- train on synthetic, test on real

_MAX_TRAIN_ROWS = 20_000
_L2 = 1e-3


def _features(codes: np.ndarray, domain: Domain, target: int) -> sparse.csr_matrix:
    """One-hot features of every attribute but the target, plus an intercept column (sparse)."""
    keep = [a for a in range(domain.n_attributes) if a != target]
    offsets = np.concatenate([[0], np.cumsum([domain.sizes[a] for a in keep])])
    n = codes.shape[0]
    cols = np.column_stack([codes[:, a] + offsets[i] for i, a in enumerate(keep)] + [np.full(n, offsets[-1])])
    rows = np.repeat(np.arange(n), cols.shape[1])
    data = np.ones(rows.size, dtype=np.float64)
    return sparse.csr_matrix((data, (rows, cols.ravel())), shape=(n, int(offsets[-1]) + 1))


def _fit_softmax(x: sparse.csr_matrix, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Multinomial logistic regression: mean cross-entropy + (L2/2)||W||^2 (intercept unpenalised), L-BFGS."""
    n, d = x.shape
    onehot_y = np.zeros((n, n_classes))
    onehot_y[np.arange(n), y] = 1.0
    penalty = np.ones((d, 1))
    penalty[-1] = 0.0

    def loss_grad(flat: np.ndarray) -> tuple[float, np.ndarray]:
        w = flat.reshape(d, n_classes)
        logits = x @ w
        logits -= logits.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(logits).sum(axis=1, keepdims=True))
        log_p = logits - log_norm
        loss = -(onehot_y * log_p).sum() / n + 0.5 * _L2 * float((penalty * w * w).sum())
        grad = x.T @ (np.exp(log_p) - onehot_y) / n + _L2 * penalty * w
        return loss, np.asarray(grad).ravel()

    result = optimize.minimize(loss_grad, np.zeros(d * n_classes), jac=True, method="L-BFGS-B",
                               options={"maxiter": 300})
    return result.x.reshape(d, n_classes)


def _accuracy(w: np.ndarray, x: sparse.csr_matrix, y: np.ndarray) -> float:
    return float(np.mean(np.asarray(x @ w).argmax(axis=1) == y))


def _subsample(codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if codes.shape[0] <= _MAX_TRAIN_ROWS:
        return codes
    return codes[np.sort(rng.choice(codes.shape[0], size=_MAX_TRAIN_ROWS, replace=False))]


def tstr_score(real_codes: np.ndarray, synthetic_codes: np.ndarray, domain: Domain, target: int, seed: int = 0) -> dict:
    """Train-on-synthetic / test-on-real accuracy for predicting attribute ``target`` from the others.

    The real rows are split (seeded, 70/30) into a training and a held-out test part. On the held-out
    real rows it reports the accuracy of a multinomial logistic regression (one-hot features, small L2)
    trained on synthetic rows ("tstr"), the same model trained on the real training rows ("trtr"), and
    always predicting the real training rows' majority class ("majority_baseline"). Training sets are
    subsampled to at most 20,000 rows. Reads the real data: NOT differentially private.
    """
    real = _check_codes(real_codes, domain, "real_codes")
    synth = _check_codes(synthetic_codes, domain, "synthetic_codes")
    if domain.n_attributes < 2:
        raise ValueError("tstr_score needs at least one attribute besides the target")
    if not 0 <= target < domain.n_attributes:
        raise ValueError(f"target must be an attribute index in [0, {domain.n_attributes}), got {target}")
    if real.shape[0] < 10:
        raise ValueError(f"tstr_score needs at least 10 real rows to hold some out, got {real.shape[0]}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(real.shape[0])
    n_test = max(1, int(round(0.3 * real.shape[0])))
    test, train = real[order[:n_test]], real[order[n_test:]]
    train = _subsample(train, rng)
    synth_train = _subsample(synth, rng)
    n_classes = domain.sizes[target]

    x_test, y_test = _features(test, domain, target), test[:, target]
    w_real = _fit_softmax(_features(train, domain, target), train[:, target], n_classes)
    w_synth = _fit_softmax(_features(synth_train, domain, target), synth_train[:, target], n_classes)
    majority = int(np.bincount(train[:, target], minlength=n_classes).argmax())
    return {
        "target": domain.names[target],
        "model": f"multinomial logistic regression, one-hot features, L2 {_L2}",
        "tstr_accuracy": _accuracy(w_synth, x_test, y_test),
        "trtr_accuracy": _accuracy(w_real, x_test, y_test),
        "majority_baseline": float(np.mean(y_test == majority)),
        "n_train_synthetic": int(synth_train.shape[0]),
        "n_train_real": int(train.shape[0]),
        "n_test_real": int(test.shape[0]),
    }


# ---------------------------------------------------------------- the whole audit and its reports

def build_audit(
    real_codes: np.ndarray,
    synthetic_codes: np.ndarray,
    schema: Schema,
    domain: Domain,
    out_dir: str | Path,
    target_column: str | None = None,
    *,
    max_marginals: int | None = None,
    seed: int = 0,
) -> dict:
    """The full audit as a JSON-serialisable dict; writes one PNG per column into ``out_dir``.

    Marked ``"visibility": "internal"``: it reads the real data and is NOT differentially private.
    ``plots`` lists the PNG file names (relative to ``out_dir``); ``tstr`` is None without a target.
    """
    if domain_of(schema) != domain:
        raise ValueError("the domain does not match the schema's kept columns (names and level counts)")
    if target_column is not None and target_column not in domain.names:
        raise ValueError(f"target_column {target_column!r} is not a kept column; choose one of {list(domain.names)}")
    real = _check_codes(real_codes, domain, "real_codes")
    synth = _check_codes(synthetic_codes, domain, "synthetic_codes")
    distributions = column_distributions(real, synth, schema)
    plots = plot_columns(distributions, out_dir)
    tstr = None
    if target_column is not None:
        tstr = tstr_score(real, synth, domain, domain.names.index(target_column), seed=seed)
    return {
        "visibility": "internal",
        "differentially_private": False,
        "notice": NOT_PRIVATE_NOTICE,
        "schema": schema.name,
        "n_real_rows": int(real.shape[0]),
        "n_synthetic_rows": int(synth.shape[0]),
        "marginals": marginal_error_summary(real, synth, domain, max_marginals=max_marginals, seed=seed),
        "marginal_subset": {"max_marginals": max_marginals, "seed": seed},
        "columns": distributions,
        "plots": [p.name for p in plots],
        "tstr": tstr,
    }


def _md_cell(text: object) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _largest_gap(dist: dict) -> str:
    gaps = np.abs(np.asarray(dist["real"]) - np.asarray(dist["synthetic"]))
    i = int(gaps.argmax())
    return f"{dist['labels'][i]}: {dist['real'][i]:.3f} vs {dist['synthetic'][i]:.3f}"


def render_markdown(audit: dict, plot_paths, *, relative_to: str | Path | None = None, embed: bool = False) -> str:
    """A Markdown report of an audit, headed by the INTERNAL label.

    Images are referenced by path: relative to ``relative_to`` when given, else by file name (for an
    audit.md written beside the PNGs). ``embed=True`` inlines them as base64 data URIs instead, for
    viewers that cannot resolve files (e.g. a pasted artifact); GitHub does not render data URIs.
    """
    lines = [
        "# INTERNAL \u2014 synthetic data accuracy audit",
        "",
        f"> **{_md_cell(audit['notice'])}**",
        "",
        f"Schema `{audit['schema']}`: {audit['n_real_rows']} real rows, {audit['n_synthetic_rows']} synthetic rows.",
        "",
        "## k-way marginals (total variation on proportions)",
        "",
        "| k | marginals | mean TV | independent model mean TV | max TV (columns) | max abs cell error |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for k, stats in sorted(audit["marginals"].items(), key=lambda kv: int(kv[0])):
        worst = " x ".join(stats.get("worst_marginal", []))
        lines.append(f"| {k} | {stats['n_marginals']} | {stats['mean_tv']:.4f} | "
                     f"{stats.get('independent_mean_tv', float('nan')):.4f} | {stats['max_tv']:.4f} "
                     f"({_md_cell(worst)}) | {stats['max_abs_cell_error']:.4f} |")
    lines += ["", "The independent model (the product of the real 1-way marginals) is the yardstick: a release "
              "above it on 2- and 3-way marginals has learnt no dependence between columns."]
    subset = audit.get("marginal_subset") or {}
    if subset.get("max_marginals") is not None:
        lines += ["", f"At most {subset['max_marginals']} marginals per k, drawn uniformly with seed {subset['seed']}."]
    tstr = audit.get("tstr")
    if tstr:
        lines += [
            "",
            f"## Train on synthetic, test on real (target `{_md_cell(tstr['target'])}`)",
            "",
            f"Model: {tstr['model']}; accuracy on {tstr['n_test_real']} held-out real rows.",
            "",
            "| trained on | accuracy |",
            "|---|---:|",
            f"| synthetic ({tstr['n_train_synthetic']} rows) | {tstr['tstr_accuracy']:.4f} |",
            f"| real ({tstr['n_train_real']} rows) | {tstr['trtr_accuracy']:.4f} |",
            f"| majority class | {tstr['majority_baseline']:.4f} |",
        ]
    lines += ["", "## Columns", "", "| column | levels | TV | largest gap (real vs synthetic) |", "|---|---:|---:|---|"]
    for name, dist in audit["columns"].items():
        lines.append(f"| {_md_cell(name)} | {len(dist['labels'])} | {dist['tv']:.4f} "
                     f"| {_md_cell(_largest_gap(dist))} |")
    paths = [Path(p) for p in plot_paths]
    if paths:
        lines += ["", "## Column distributions", ""]
        for name, path in zip(audit["columns"], paths):
            if embed:
                src = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
            elif relative_to is not None:
                src = Path(os.path.relpath(path.resolve(), Path(relative_to).resolve())).as_posix()
            else:
                src = path.name
            lines += [f"![{_md_cell(name)}]({src})", ""]
    return "\n".join(lines).rstrip() + "\n"


def headline(audit: dict) -> str:
    """One short line for the CLI, e.g. ``audit (internal): mean TV 1-way 0.012, 2-way 0.034, 3-way 0.061``."""
    parts = [f"{k}-way {v['mean_tv']:.3f}"
             + (f" (independent {v['independent_mean_tv']:.3f})" if "independent_mean_tv" in v else "")
             for k, v in sorted(audit["marginals"].items(), key=lambda kv: int(kv[0]))]
    line = "audit (internal): mean TV " + ", ".join(parts)
    tstr = audit.get("tstr")
    if tstr:
        line += (f"; TSTR acc {tstr['tstr_accuracy']:.3f} (real {tstr['trtr_accuracy']:.3f}, majority "
                 f"{tstr['majority_baseline']:.3f})")
    return line
