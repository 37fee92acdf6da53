"""The extract worker: the release's extraction over a slice's responses, and the judge fallback
(CONTRACTS §4) through the generation backend.

The judge is scripted at the narrowest edge: a backend whose ``generate`` returns prepared
outputs (a real Qwen3-32B cannot run here). Everything around it — the request the worker
builds, the validation of each output, the retries at growing budgets, the row records,
resume — is the real code. The scripted backend also records what the judge was sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stages_support import run_worker

from trace_tui.common.digest import sha256_text


class ScriptedJudge:
    """A GenerationBackend that answers each judge request from a script keyed by the model response."""

    name = "scripted"

    def __init__(self, script: dict[str, list[str]]) -> None:
        self.script = script
        self.requests: list = []
        self.seen: dict[str, int] = {}

    def generate(self, requests):
        out = []
        for r in requests:
            self.requests.append(r)
            payload = json.loads(r.messages[-1]["content"])
            response = payload["model_response"]
            k = self.seen.get(response, 0)
            self.seen[response] = k + 1
            outputs = self.script[response]
            out.append(outputs[min(k, len(outputs) - 1)])
        return out


def ok(answer, evidence) -> str:
    return json.dumps({"status": "ok", "answer": answer, "evidence": evidence})


# (response, answer type, reference, judge outputs per attempt, expected final, expected value)
CASES = [
    ('The two totals differ by 42.\n{"answer": 42}', "integer", 42, [], "found", 42),
    ("Counting the bars, it's 42 in the end", "integer", 42, [ok(42, "it's 42")], "judged", 42),
    ("So the panel is Harbor, I believe", "string", "Harbor",
     [json.dumps({"status": "ok", "answer": "Harbor", "evidence": "panel is Harbor", "note": "x"}),  # invalid keys
      "```json\n" + ok("Harbor", "panel is Harbor") + "\n```"], "judged", "Harbor"),  # valid at 256
    ("Maybe C or D, hard to say", "option_letter", "C",
     [ok("C", "Maybe C, hard")] * 3, "unresolved", None),  # evidence not verbatim, every time
    ("The value shown is large", "number", 2.5,
     [ok(2.5, "The value shown is large")] * 3, "unresolved", None),  # evidence without the answer
    ("Answer: 3\nFinal answer: 4", "integer", 4,
     [json.dumps({"status": "ambiguous", "answer": None, "evidence": ""})], "unresolved", None),
]


def write_generate_rows(campaign: Path, rows_rel: str) -> None:
    from trace_tui.common.digest import sha256_text
    from trace_tui.common.atomic import atomic_write_json

    for i, (resp, kind, ref, *_rest) in enumerate(CASES):
        atomic_write_json(campaign / rows_rel / "rows" / f"{i:06d}.json", {
            "index": i, "instance_id": f"id{i}", "domain": "charts" if i % 2 else "games", "task": f"task_{i % 3}",
            "answer_type": kind, "answer_gt": ref, "seed": 42, "response": resp,
            "response_sha256": sha256_text(resp), "inputs_sha256": "x"})


def extract_job(args: list[str]) -> dict:
    return {"step": "extract", "slice": {"model": "m", "seed": 42, "benchmark": "b"}, "args": args,
            "upstream_outputs": {"generate": "outputs/generate/s"}, "output_dir": "outputs/extract/s"}


def test_judge_path_with_scripted_outputs(monkeypatch, tmp_path, release_judge) -> None:
    from trace_tui.release import release_lock
    from trace_tui.stages import extract

    write_generate_rows(tmp_path, "outputs/generate/s")
    judge = ScriptedJudge({c[0]: c[3] for c in CASES if c[3]})
    receipt, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run,
                                 extract_job(["--judge", str(tmp_path), "--judge-max-tokens", "128,256,512"]),
                                 judge_backend=judge)
    rows = {int(f.stem): json.loads(f.read_text()) for f in (tmp_path / "outputs/extract/s/rows").glob("*.json")}
    for i, (resp, kind, ref, outputs, final, value) in enumerate(CASES):
        assert rows[i]["final"] == final, (i, rows[i])
        assert rows[i]["value"] == value
        assert rows[i]["answer_gt"] == ref and rows[i]["answer_type"] == kind
    # Found rows never reach the judge; the others get 128, then 256, then 512 tokens until valid.
    assert rows[0]["judge"] is None and rows[0]["extraction"]["status"] == "found"
    assert [a["max_tokens"] for a in rows[1]["judge"]["attempts"]] == [128]
    assert [(a["max_tokens"], a["valid"]) for a in rows[2]["judge"]["attempts"]] == [(128, False), (256, True)]
    assert "keys" in rows[2]["judge"]["attempts"][0]["reason"]
    assert [a["max_tokens"] for a in rows[3]["judge"]["attempts"]] == [128, 256, 512]
    assert "verbatim" in rows[3]["judge"]["attempts"][-1]["reason"]
    assert "does not contain the answer" in rows[4]["judge"]["attempts"][0]["reason"]
    assert rows[5]["extraction"]["status"] == "ambiguous" and rows[5]["judge"]["judge_status"] == "ambiguous"
    # What the judge was sent: only the answer type and the response; greedy; thinking off; no image.
    # The system prompt is the release's own (read from its judge_extract.py), sampled as the release did.
    pin = release_lock().judge.system_prompt
    for r in judge.requests:
        assert r.images == [] and r.sampling.temperature == 0.0 and r.template_kwargs == {"enable_thinking": False}
        assert (r.sampling.top_p, r.seed) == (1.0, 0)
        assert set(json.loads(r.messages[-1]["content"])) == {"answer_type", "model_response"}
        assert r.messages[0]["role"] == "system" and sha256_text(r.messages[0]["content"]) == pin.sha256
    assert len(judge.requests) == 1 + 2 + 3 + 3 + 1
    content = receipt["content"]
    assert content["judge"]["prompt_sha256"] == pin.sha256 and content["judge"]["budgets"] == [128, 256, 512]
    assert content["judge"]["prompt_source"] == "rlvr/evaluation/trace_validation/judge_extract.py#SYSTEM_PROMPT"
    assert rows[1]["judge"]["prompt_sha256"] == pin.sha256
    assert content["counts"] == {"found": 1, "judged": 2, "unresolved_missing": 2, "unresolved_ambiguous": 1}
    assert any(e["type"] == "progress" and e["phase"] == "judge" for e in events)
    # A rerun reads the rows back and asks the judge nothing.
    again = ScriptedJudge({})
    run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run,
               extract_job(["--judge", str(tmp_path), "--judge-max-tokens", "128,256,512"]), judge_backend=again)
    assert again.requests == []


def test_no_judge_leaves_rows_unresolved(monkeypatch, tmp_path) -> None:
    from trace_tui.stages import extract

    write_generate_rows(tmp_path, "outputs/generate/s")
    receipt, _ = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, extract_job(["--no-judge"]))
    assert receipt["content"]["counts"] == {"found": 1, "unresolved_missing": 4, "unresolved_ambiguous": 1}


def test_extract_real_sample_answers_written_in_the_release_format(monkeypatch, tmp_path, trace_sample_dir) -> None:
    """Real TRACE references, answered the way the system prompt asks: every row is found and right."""
    from trace_tui.stages import extract, score
    from trace_tui.common.digest import sha256_text
    from trace_tui.common.atomic import atomic_write_json

    rows = [json.loads(line) for line in (trace_sample_dir / "trace-sample.jsonl").read_text().splitlines()]
    for i, r in enumerate(rows):
        gt = json.loads(r["answer_gt"]) if isinstance(r["answer_gt"], str) else r["answer_gt"]
        resp = f"Looking at the image carefully.\n{json.dumps({'answer': gt['value']})}"
        atomic_write_json(tmp_path / "outputs/generate/s/rows" / f"{i:06d}.json", {
            "index": i, "instance_id": r["instance_id"], "domain": r["domain"], "task": r["task"],
            "answer_type": gt["type"], "answer_gt": gt["value"], "response": resp, "response_sha256": sha256_text(resp)})
    receipt, _ = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, extract_job(["--no-judge"]))
    assert receipt["content"]["counts"] == {"found": len(rows)}
    job = {"slice": {"model": "m", "seed": 42, "benchmark": "b"}, "upstream_outputs": {"extract": "outputs/extract/s"},
           "output_dir": "outputs/score/s", "total": len(rows)}
    record, _ = run_worker(monkeypatch, tmp_path, tmp_path / "store", score.run, job)
    assert record["accuracy"] == 100.0 and record["total"] == 262 and len(record["by_domain"]) == 11


@pytest.mark.parametrize("args, fix", [(["--judge-max-tokens", "0,5"], "positive"), (["--bogus"], "unknown")])
def test_bad_step_arguments_are_one_line(monkeypatch, tmp_path, args, fix) -> None:
    from trace_tui.stages import extract
    from trace_tui.stages.jobs import JobError

    write_generate_rows(tmp_path, "outputs/generate/s")
    with pytest.raises(JobError, match=fix):
        run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, extract_job(args))


@pytest.mark.slow
def test_tiny_model_as_judge_through_the_transformers_backend(monkeypatch, tmp_path, tiny_qwen25vl_dir) -> None:
    """The demo's judge: the tiny random model behind the real backend. Its outputs are never valid
    JSON, so every judged row stays unresolved after the three budgets."""
    from trace_tui.stages import extract

    write_generate_rows(tmp_path, "outputs/generate/s")
    receipt, _ = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run,
                            extract_job(["--judge", str(tiny_qwen25vl_dir), "--judge-max-tokens", "4,8,16",
                                         "--backend", "transformers"]))
    assert receipt["content"]["counts"]["found"] == 1
    assert receipt["content"]["judge"]["sha256set"].startswith("sha256set:")
    row = json.loads((tmp_path / "outputs/extract/s/rows/000001.json").read_text())
    assert [a["max_tokens"] for a in row["judge"]["attempts"]] == [4, 8, 16]


def test_batched_judge_equals_the_library_row_by_row() -> None:
    """The worker judges a chunk of rows per budget; for every row the outcome must be exactly what
    trace_tui.scoring.judge_with_retries gives for that row alone."""
    from trace_tui.scoring import judge_with_retries
    from trace_tui.stages.extract import JudgeClient, judge_rows

    from trace_tui.scoring import OWN_JUDGE_PROMPT as prompt

    cases = [c for c in CASES if c[3]]
    batched = judge_rows(JudgeClient(None, "scripted", ScriptedJudge({c[0]: c[3] for c in cases})),
                         [(c[0], c[1]) for c in cases], [128, 256, 512], prompt)
    for case, got in zip(cases, batched, strict=True):
        alone = ScriptedJudge({case[0]: case[3]})
        want = judge_with_retries(JudgeClient(None, "scripted", alone), case[0], case[1], [128, 256, 512],
                                  prompt=prompt)
        assert got.to_dict() == want.to_dict()


@pytest.mark.slow
def test_a_batch_worker_loads_the_judge_once_for_all_its_slices(monkeypatch, tmp_path, tiny_qwen25vl_dir) -> None:
    """A keep_loaded step's worker (the runner's batch job) loads the judge once and serves every
    slice with it; one job per slice loads it per slice. The judge is the demo's tiny model behind
    the real transformers backend; its loads are counted from the worker's own events and receipts."""
    from trace_tui.stages import extract

    args = ["--judge", str(tiny_qwen25vl_dir), "--judge-max-tokens", "4", "--backend", "transformers"]

    def slice_job(name: str, out: str) -> dict:
        write_generate_rows(tmp_path, f"outputs/generate/{name}")
        return dict(extract_job(args), slice={"model": "m", "seed": 42, "benchmark": name},
                    upstream_outputs={"generate": f"outputs/generate/{name}"}, output_dir=f"outputs/{out}/{name}")

    def judge_loads(events: list) -> int:
        return sum(1 for e in events if e["type"] == "log" and e["message"].startswith("judge loaded: "))

    batch = {"step": "extract", "batch": [slice_job(n, "extract") for n in ("a", "b", "c")]}
    _, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run_job, batch)
    assert judge_loads(events) == 1
    ends = [(e["benchmark"], e["state"]) for e in events if e["type"] == "status"]
    assert ends == [("a", "completed"), ("b", "completed"), ("c", "completed")]
    receipts = [json.loads((tmp_path / f"outputs/extract/{n}/extract.receipt.json").read_text()) for n in "abc"]
    assert all(r["circumstance"]["judge_calls"] == 5 for r in receipts)  # every slice was judged
    assert [r["circumstance"]["judge_loads"] for r in receipts] == [1, 0, 0]
    # The same slices, one job each (the old way): a load per slice.
    apart = []
    for n in ("a", "b"):
        _, ev = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run_job, slice_job(n, "apart"))
        apart.append(judge_loads(ev))
    assert apart == [1, 1]
    # Served together or apart, each slice's rows are the same.
    for n in ("a", "b"):
        together = sorted((tmp_path / f"outputs/extract/{n}/rows").glob("*.json"))
        assert [f.read_bytes() for f in together] == \
               [(tmp_path / f"outputs/apart/{n}/rows" / f.name).read_bytes() for f in together]
