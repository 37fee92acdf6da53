"""Content checks of a release: pure functions of parsed documents -> (message when passed, problems).

results.json complete and consistent with its suite and the release lock, its stored
aggregates recomputed from the benchmark scores, the TRACE validation results consistent
with their suite and receipt, the training configs pinning the release's models and data.
Nothing here reads a file or decides whom to blame: ``verify.release`` hands each check the
documents it names and turns the problems into a line of the checklist.
"""

from __future__ import annotations

import math
from collections import Counter, namedtuple
from collections.abc import Iterable
from typing import TYPE_CHECKING

from trace_tui.verify import aggregate as agg
from trace_tui.verify import documents as d

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock

TOLERANCE = 1e-9


class Problem(namedtuple("Problem", "message expected actual", defaults=(None, None))):
    """One thing a content check found wrong: a message, and the expected and actual values when there are any."""

    __slots__ = ()



def suite_categories(suite: d.EvalSuiteDoc):
    problems = []
    by_bench = {b.key: b.category for b in suite.benchmarks}
    listed = [k for ks in suite.categories.values() for k in ks]
    if sorted(listed) != sorted(by_bench):
        problems.append(Problem("categories list other benchmarks than benchmarks[]", sorted(by_bench), sorted(listed)))
    for cat, keys in suite.categories.items():
        for k in keys:
            if k in by_bench and by_bench[k] != cat:
                problems.append(Problem(f"{k}: category {by_bench[k]!r} in benchmarks[], {cat!r} in categories",
                                         cat, by_bench[k]))
    dup = [k for k, n in Counter(b.key for b in suite.benchmarks).items() if n > 1]
    if dup:
        problems.append(Problem(f"duplicate benchmarks {dup}"))
    return f"{len(suite.benchmarks)} benchmarks in {len(suite.categories)} categories", problems


def provenance_vs_suite(prov: d.ProvenanceDoc, suite: d.EvalSuiteDoc):
    problems = []
    if prov.suite_id != suite.suite_id:
        problems.append(Problem("suite_id differs from the suite's", suite.suite_id, prov.suite_id))
    p = {b.benchmark_id: b for b in prov.benchmarks}
    s = {b.key: b for b in suite.benchmarks}
    if set(p) != set(s):
        problems.append(Problem("provenance covers other benchmarks than the suite", sorted(s), sorted(p)))
    for k in sorted(set(p) & set(s)):
        if p[k].category != s[k].category:
            problems.append(Problem(f"{k}: category differs", s[k].category, p[k].category))
        if p[k].row_count != s[k].rows:
            problems.append(Problem(f"{k}: row_count differs from the suite's rows", s[k].rows, p[k].row_count))
    return f"{len(p)} benchmarks, categories and rows as in the suite", problems


_DECODING_KEYS = ("temperature", "top_p", "top_k", "presence_penalty", "repetition_penalty", "max_tokens",
                  "min_image_pixels", "max_image_pixels")


def results_suite(res: d.ResultsDoc, suite: d.EvalSuiteDoc):
    rs = res.suite
    problems = []
    if rs.suite_id != suite.suite_id:
        problems.append(Problem("suite.suite_id differs from the suite", suite.suite_id, rs.suite_id))
    if rs.benchmark_count != len(suite.benchmarks):
        problems.append(Problem("suite.benchmark_count differs from the suite", len(suite.benchmarks), rs.benchmark_count))
    rows = sum(b.rows for b in suite.benchmarks)
    if rs.rows_per_model_seed != rows:
        problems.append(Problem("suite.rows_per_model_seed differs from the suite's rows", rows, rs.rows_per_model_seed))
    for k in _DECODING_KEYS:
        if rs.decoding.get(k) != suite.generation.get(k):
            problems.append(Problem(f"suite.decoding.{k} differs from the suite's generation",
                                     suite.generation.get(k), rs.decoding.get(k)))
    if rs.vlmevalkit.commit != suite.vlmevalkit.commit:
        problems.append(Problem("suite.vlmevalkit.commit differs", suite.vlmevalkit.commit, rs.vlmevalkit.commit))
    return f"{suite.suite_id}: {len(suite.benchmarks)} benchmarks, {rows} rows per model and seed", problems


def results_models(res: d.ResultsDoc, lock: ReleaseLock):
    problems = []
    ids = [m.model_id for m in res.models]
    want = [m.id for m in lock.models]
    if sorted(ids) != sorted(want) or len(ids) != len(set(ids)):
        problems.append(Problem("models[] differ from the release's models", want, ids))
    for m in res.models:
        pin = next((p for p in lock.models if p.id == m.model_id), None)
        if pin is None:
            continue
        if (m.repository_id, m.repository_revision) != (pin.repo_id, pin.revision):
            problems.append(Problem(f"{m.model_id}: repository differs from the release lock", pin.ref,
                                     f"{m.repository_id}@{m.repository_revision}"))
        if m.parameter_scale != pin.scale:
            problems.append(Problem(f"{m.model_id}: parameter_scale differs", pin.scale, m.parameter_scale))
    if res.seeds != list(lock.trace_eval.seeds):
        problems.append(Problem("seeds differ from the release's seeds", lock.trace_eval.seeds, res.seeds))
    return f"{len(ids)} models, seeds {', '.join(map(str, res.seeds))}", problems


def results_complete(res: d.ResultsDoc, suite: d.EvalSuiteDoc, lock: ReleaseLock):
    models = [m.id for m in lock.models]
    seeds = list(lock.trace_eval.seeds)
    benches = [b.key for b in suite.benchmarks]
    want = {(m, s, b) for m in models for s in seeds for b in benches}
    got = Counter((x.model_id, x.seed, x.benchmark_id) for x in res.scores.benchmark_scores)
    problems = []
    for k in sorted(want - set(got)):
        problems.append(Problem(f"missing score {k[0]}/{k[1]}/{k[2]}"))
    for k in sorted(set(got) - want):
        problems.append(Problem(f"unexpected score {k[0]}/{k[1]}/{k[2]} (not in the suite x models x seeds)"))
    for k, n in sorted(got.items()):
        if n > 1:
            problems.append(Problem(f"duplicate score {k[0]}/{k[1]}/{k[2]} ({n} rows)"))
    for x in res.scores.benchmark_scores:
        if not math.isfinite(x.score) or not 0.0 <= x.score <= 100.0:
            problems.append(Problem(f"score {x.model_id}/{x.seed}/{x.benchmark_id} is not a percentage", "0..100", x.score))
    if problems:
        problems[0] = problems[0]._replace(expected=f"{len(want)} scores", actual=f"{sum(got.values())} rows")
    n = len(want)
    return (f"{n} scores = {len(models)} models x {len(seeds)} seeds x {len(benches)} benchmarks, no duplicates",
            problems)


def results_rows(res: d.ResultsDoc, suite: d.EvalSuiteDoc):
    rows = {b.key: b.rows for b in suite.benchmarks}
    problems = []
    for x in res.scores.benchmark_scores:
        if x.benchmark_id in rows and x.evaluated_rows != rows[x.benchmark_id]:
            problems.append(Problem(f"{x.model_id}/{x.seed}/{x.benchmark_id}: evaluated_rows differs from the suite",
                                     rows[x.benchmark_id], x.evaluated_rows))
    for x in res.scores.benchmark_summaries:
        if x.benchmark_id in rows and x.evaluated_rows != rows[x.benchmark_id]:
            problems.append(Problem(f"summary {x.model_id}/{x.benchmark_id}: evaluated_rows differs from the suite",
                                     rows[x.benchmark_id], x.evaluated_rows))
    return f"every score evaluated on the suite's rows ({sum(rows.values())} per model and seed)", problems


# ---- aggregates ----------------------------------------------------------------------------------

AGGREGATES = (
    ("benchmark_summaries", "benchmark mean ± sample std over seeds"),
    ("category_scores", "per-seed category scores"),
    ("category_summaries", "category mean ± sample std"),
    ("overall_scores", "per-seed overall scores"),
    ("overall_summaries", "overall mean ± sample std"),
    ("overall_deltas", "paired overall changes against the base"),
    ("benchmark_deltas", "paired per-benchmark changes against the base"),
)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= TOLERANCE


class _Compare:
    """Collects stored-vs-recomputed differences for one aggregate family."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.values = 0

    def value(self, what: str, stored: float | None, recomputed: float | None) -> None:
        self.values += 1
        if not _close(stored, recomputed):
            self.problems.append(Problem(f"{what}: stored {stored!r}, recomputed {recomputed!r}", recomputed, stored))

    def equal(self, what: str, stored: object, expected: object) -> None:
        if stored != expected:
            self.problems.append(Problem(f"{what}: stored {stored!r}, expected {expected!r}", expected, stored))

    def keys(self, what: str, stored: Iterable[tuple], recomputed: Iterable[tuple]) -> None:
        st = Counter(stored)
        rc = set(recomputed)
        for k in sorted(rc - set(st), key=str):
            self.problems.append(Problem(f"{what} {'/'.join(map(str, k))}: missing from results.json"))
        for k in sorted(set(st) - rc, key=str):
            self.problems.append(Problem(f"{what} {'/'.join(map(str, k))}: stored but not derivable from the scores"))
        for k, n in st.items():
            if n > 1:
                self.problems.append(Problem(f"{what} {'/'.join(map(str, k))}: stored {n} times"))

    def delta(self, what: str, stored: d.StoredDelta, rec) -> None:
        self.value(f"{what} mean", stored.mean, rec.mean)
        self.value(f"{what} stddev", stored.stddev, rec.stddev)
        sv = {x.seed: x.delta for x in stored.seed_values}
        if len(sv) != len(stored.seed_values) or set(sv) != set(rec.seed_values):
            self.problems.append(Problem(f"{what}: seeds {sorted(sv)} stored, {sorted(rec.seed_values)} paired",
                                          sorted(rec.seed_values), sorted(sv)))
        for s in sorted(set(sv) & set(rec.seed_values)):
            self.value(f"{what} seed {s}", sv[s], rec.seed_values[s])


def aggregate_check(name: str, res: d.ResultsDoc, suite: d.EvalSuiteDoc, lock: ReleaseLock):
    # Converted once per results document, not in each of the seven aggregate checks.
    scores = res.__dict__.get("_score_index")
    if scores is None:
        records = agg.as_records(res.scores.benchmark_scores)
        keys = {(x.model_id, x.seed, x.benchmark_id) for x in records}
        scores = res.__dict__["_score_index"] = agg.index(records) if len(keys) == len(records) else False
    if scores is False:
        return "", [Problem("cannot recompute: duplicate benchmark scores (see results.complete)")]
    records = scores  # every aggregate below accepts the index and skips re-indexing
    categories = {c: list(ks) for c, ks in suite.categories.items()}
    # The seven checks share intermediate aggregates (per-seed overall and category scores, each
    # model's scores by seed): computed once per results document and suite categories.
    memo = res.__dict__.setdefault("_aggregates", {}).setdefault(
        tuple((cat, tuple(ks)) for cat, ks in categories.items()), {})

    def shared(key: str, compute):
        if key not in memo:
            memo[key] = compute()
        return memo[key]

    def per_seed_categories():
        return shared("category_scores", lambda: agg.category_scores(records, categories))

    def per_seed_overall():
        return shared("overall_scores", lambda: agg.overall_scores(records))

    n_bench = len(suite.benchmarks)
    c = _Compare()
    sc = res.scores
    if name == "benchmark_summaries":
        rec = agg.benchmark_summaries(records)
        c.keys("benchmark summary", [(x.model_id, x.benchmark_id) for x in sc.benchmark_summaries], rec)
        for x in sc.benchmark_summaries:
            r = rec.get((x.model_id, x.benchmark_id))
            if r is not None:
                what = f"{x.model_id}/{x.benchmark_id}"
                c.value(f"{what} mean", x.mean, r.mean)
                c.value(f"{what} stddev", x.stddev, r.stddev)
                c.equal(f"{what} seed_count", x.seed_count, r.n)
    elif name == "category_scores":
        rec = per_seed_categories()
        c.keys("category score", [(x.model_id, x.seed, x.category_name) for x in sc.category_scores], rec)
        for x in sc.category_scores:
            r = rec.get((x.model_id, x.seed, x.category_name))
            if r is not None:
                c.value(f"{x.model_id}/{x.seed}/{x.category_name}", x.score, r)
                c.equal(f"{x.model_id}/{x.seed}/{x.category_name} benchmark_count", x.benchmark_count,
                        len(categories[x.category_name]))
    elif name == "category_summaries":
        rec = agg.category_summaries(records, categories, per_seed=per_seed_categories())
        c.keys("category summary", [(x.model_id, x.category_name) for x in sc.category_summaries], rec)
        for x in sc.category_summaries:
            r = rec.get((x.model_id, x.category_name))
            if r is not None:
                c.value(f"{x.model_id}/{x.category_name} mean", x.mean, r.mean)
                c.value(f"{x.model_id}/{x.category_name} stddev", x.stddev, r.stddev)
                c.equal(f"{x.model_id}/{x.category_name} seed_count", x.seed_count, r.n)
    elif name == "overall_scores":
        rec = per_seed_overall()
        c.keys("overall score", [(x.model_id, x.seed) for x in sc.overall_scores], rec)
        for x in sc.overall_scores:
            r = rec.get((x.model_id, x.seed))
            if r is not None:
                c.value(f"{x.model_id}/{x.seed}", x.score, r)
                c.equal(f"{x.model_id}/{x.seed} benchmark_count", x.benchmark_count, n_bench)
        # The suite's rule: the overall also equals the mean of the category means.
        cats = per_seed_categories()
        for (m, s), v in rec.items():
            cm = [cats[(m, s, cat)] for cat in categories if (m, s, cat) in cats]
            if len(cm) == len(categories) and not _close(v, agg.mean(cm)):
                c.problems.append(Problem(f"{m}/{s}: overall {v!r} is not the mean of category means", v, agg.mean(cm)))
    elif name == "overall_summaries":
        rec = agg.overall_summaries(records, per_seed=per_seed_overall())
        c.keys("overall summary", [(x.model_id,) for x in sc.overall_summaries], [(k,) for k in rec])
        for x in sc.overall_summaries:
            r = rec.get(x.model_id)
            if r is not None:
                c.value(f"{x.model_id} mean", x.mean, r.mean)
                c.value(f"{x.model_id} stddev", x.stddev, r.stddev)
                c.equal(f"{x.model_id} seed_count", x.seed_count, r.n)
    elif name == "overall_deltas":
        for cmp in res.comparisons:
            rec = agg.overall_delta(records, cmp.model_id, cmp.base_model_id, overall=per_seed_overall())
            c.delta(f"{cmp.model_id} vs {cmp.base_model_id} overall", cmp.overall_delta, rec)
    elif name == "benchmark_deltas":
        for cmp in res.comparisons:
            rec = agg.benchmark_deltas(records, cmp.model_id, cmp.base_model_id,
                                       by_seed=shared("seed_scores", lambda: agg.seed_scores(records)))
            c.keys(f"{cmp.model_id} delta", [(x.benchmark_id,) for x in cmp.benchmark_deltas], [(k,) for k in rec])
            for x in cmp.benchmark_deltas:
                r = rec.get(x.benchmark_id)
                if r is not None:
                    c.delta(f"{cmp.model_id} vs {cmp.base_model_id} {x.benchmark_id}", x, r)
    n = c.values
    return f"{n} stored values agree with recomputation from {len(records)} scores (tolerance {TOLERANCE:g})", c.problems


def comparison_pairs(res: d.ResultsDoc, lock: ReleaseLock):
    want = {m.id: (m.base_model_id, m.scale) for m in lock.models if not m.is_base}
    got = Counter(x.model_id for x in res.comparisons)
    problems = []
    if set(got) != set(want):
        problems.append(Problem("comparisons cover other models than the trained ones", sorted(want), sorted(got)))
    for m, n in got.items():
        if n > 1:
            problems.append(Problem(f"{m}: compared {n} times"))
    for x in res.comparisons:
        if x.model_id in want and (x.base_model_id, x.parameter_scale) != want[x.model_id]:
            problems.append(Problem(f"{x.model_id}: paired with {x.base_model_id} ({x.parameter_scale})",
                                     "{} ({})".format(*want[x.model_id]), f"{x.base_model_id} ({x.parameter_scale})"))
    return f"{len(res.comparisons)} comparisons, each with its same-scale base", problems


# ---- TRACE validation --------------------------------------------------------------------------------

def validation_suite(suite: d.ValidationSuiteDoc, lock: ReleaseLock):
    tv = lock.trace_validation
    problems = []
    if suite.suite_id != tv.suite_id:
        problems.append(Problem("suite_id differs from the release lock", tv.suite_id, suite.suite_id))
    if suite.dataset.rows != tv.rows:
        problems.append(Problem("dataset.rows differs from the release lock", tv.rows, suite.dataset.rows))
    if suite.prompt.system_prompt_file != tv.system_prompt_file:
        problems.append(Problem("prompt.system_prompt_file differs", tv.system_prompt_file, suite.prompt.system_prompt_file))
    for k, v in tv.generation.model_dump().items():
        if suite.generation.get(k) != v:
            problems.append(Problem(f"generation.{k} differs from the release lock", v, suite.generation.get(k)))
    return f"{tv.suite_id}: {tv.rows} rows, seed {tv.generation.seed}, generation as pinned", problems


def validation_models(res: d.ValidationResultsDoc, suite: d.ValidationSuiteDoc, lock: ReleaseLock):
    problems = []
    got = [(r.model_id, r.label) for r in res.results]
    want = [(m.slug, m.label) for m in suite.models]
    if got != want:
        problems.append(Problem("results[] differ from the suite's models (id, label, order)", want, got))
    pins = {m.id: m for m in lock.models}
    for m in suite.models:
        pin = pins.get(m.slug)
        if pin is None:
            problems.append(Problem(f"{m.slug}: not a release model", sorted(pins), m.slug))
        elif (m.repo_id, m.revision) != (pin.repo_id, pin.revision):
            problems.append(Problem(f"{m.slug}: repository differs from the release lock", pin.ref, f"{m.repo_id}@{m.revision}"))
        elif m.label != pin.validation_label:
            problems.append(Problem(f"{m.slug}: label differs from the release lock", pin.validation_label, m.label))
    if sorted(pins) != sorted(m.slug for m in suite.models):
        problems.append(Problem("suite models differ from the release's models", sorted(pins),
                                 sorted(m.slug for m in suite.models)))
    return f"{len(got)} models, as in the suite and the release lock", problems


def validation_rows(res: d.ValidationResultsDoc, suite: d.ValidationSuiteDoc):
    rows, seed = suite.dataset.rows, suite.generation.get("seed")
    problems = []
    if res.evaluation.rows_per_model != rows:
        problems.append(Problem("evaluation.rows_per_model differs from the suite", rows, res.evaluation.rows_per_model))
    if res.evaluation.seed != seed:
        problems.append(Problem("evaluation.seed differs from the suite's generation seed", seed, res.evaluation.seed))
    for r in res.results:
        if r.evaluated_rows != rows:
            problems.append(Problem(f"{r.model_id}: evaluated_rows differs from the suite", rows, r.evaluated_rows))
    return f"every model scored on {rows} rows at seed {seed}", problems


def validation_scores(res: d.ValidationResultsDoc):
    problems = []
    for r in res.results:
        correct = r.score * r.evaluated_rows / 100.0
        if not (math.isfinite(r.score) and 0.0 <= r.score <= 100.0) or abs(correct - round(correct)) > 1e-6:
            problems.append(Problem(f"{r.model_id}: score {r.score} is not a whole number of {r.evaluated_rows} rows",
                                     "k/rows x 100", r.score))
    return f"{len(res.results)} accuracies, each a whole number of correct rows", problems


def validation_receipt(rc: d.ValidationReceiptDoc, res: d.ValidationResultsDoc, suite: d.ValidationSuiteDoc,
                        lock: ReleaseLock):
    tv = lock.trace_validation
    problems = []
    cv, pr, src = rc.campaign_verification, rc.public_release, rc.immutable_source
    n_models, rows, seed = len(suite.models), suite.dataset.rows, suite.generation.get("seed")

    def same(what, expected, actual):
        if expected != actual:
            problems.append(Problem(f"{what}: receipt states {actual!r}, expected {expected!r}", expected, actual))

    same("campaign_verification.status", "ok", cv.status)
    same("campaign_verification.models", n_models, cv.models)
    same("campaign_verification.seed", seed, cv.seed)
    same("campaign_verification.rows_per_model", rows, cv.rows_per_model)
    same("campaign_verification.generation_rows", n_models * rows, cv.generation_rows)
    same("campaign_verification.scored_rows", n_models * rows, cv.scored_rows)
    same("public_release.result_rows", len(res.results), pr.result_rows)
    same("public_release.suite_path", tv.suite_path, pr.suite_path)
    same("public_release.results_path", tv.results_path, pr.results_path)
    same("immutable_source.dataset_revision", res.source.dataset_revision, src.dataset_revision)
    same("immutable_source.run_id", res.source.run_id, src.run_id)
    scores = src.files.get("benchmark_scores")
    same("immutable_source.files.benchmark_scores.sha256", res.source.results_sha256, scores.sha256 if scores else None)
    return f"receipt agrees: {n_models} models x {rows} rows, seed {seed}, source {src.run_id}", problems


def config_pins(doc: d.TrainingConfigDoc, scale: str, lock: ReleaseLock):
    problems = []
    r = doc.release
    trained = next((m for m in lock.models if m.scale == scale and not m.is_base and m.post_training_data
                    and m.post_training_data.startswith("TRACE")), None)
    base = lock.training_base_models.get(scale)
    if trained is not None and (r.released_model.repo_id, r.released_model.revision) != (trained.repo_id, trained.revision):
        problems.append(Problem("release.released_model differs from the release lock", trained.ref,
                                 f"{r.released_model.repo_id}@{r.released_model.revision}"))
    if base is not None and (r.base_model.repo_id, r.base_model.revision) != (base.repo_id, base.revision):
        problems.append(Problem("release.base_model differs from the release lock", base.ref,
                                 f"{r.base_model.repo_id}@{r.base_model.revision}"))
    ds = lock.dataset
    if (r.dataset.repo_id, r.dataset.revision) != (ds.repo_id, ds.revision):
        problems.append(Problem("release.dataset differs from the release lock", f"{ds.repo_id}@{ds.revision}",
                                 f"{r.dataset.repo_id}@{r.dataset.revision}"))
    if r.prompt.path != lock.trace_validation.system_prompt_file:
        problems.append(Problem("release.prompt.path differs", lock.trace_validation.system_prompt_file, r.prompt.path))
    return f"{doc.config_id}: models, dataset and prompt as pinned", problems
