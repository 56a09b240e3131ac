"""`docingest eval`: retrieval quality of an index on a BEIR-layout query set, per search mode.

    docingest eval ../shared/corpus/retrieval/scifact --index scifact \
        --ingest ../shared/corpus/retrieval/scifact/corpus.jsonl

loads the corpus through the service first (resumable), then prints nDCG@10 (linear gain, as
trec_eval), recall@10/100, MRR@10, latency and the queries each variant wins or loses against
the baseline.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from docingest import Client, DocingestError, beir, evaluate
from docingest.commands import client_for, connection_options, console, show

if TYPE_CHECKING:
    from docingest.pipeline.settings import Settings


def add_eval_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "eval",
        help="measure retrieval quality of an index on a BEIR-layout query set",
        description=(
            "Measure retrieval quality of an index on a BEIR-layout query set: nDCG@10 with "
            "linear gain, as trec_eval (and pytrec_eval, BEIR) computes it, recall@10 and "
            "@100 over the documents judged relevant (grade > 0), MRR@10, and latency."
        ),
    )
    parser.add_argument(
        "dataset", type=Path, help="folder with queries.jsonl and qrels/<split>.tsv"
    )
    parser.add_argument("--index", required=True, help="the index to search (and to load)")
    parser.add_argument("--split", default="test", help="qrels/<split>.tsv (default: test)")
    parser.add_argument("--qrels", type=Path, help="a judgments TSV instead of qrels/<split>")
    parser.add_argument(
        "--modes",
        default=",".join(evaluate.MODES),
        help="comma-separated search modes (default: vector,keyword,hybrid)",
    )
    parser.add_argument(
        "--rerank",
        action="store_true",
        help="run each mode with rerank off and on (the index or server needs a reranker)",
    )
    parser.add_argument("--baseline", help="variant the others are compared to (default: first)")
    parser.add_argument("--limit", type=int, help="evaluate only the first N judged queries")
    parser.add_argument(
        "--ingest", type=Path, metavar="CORPUS", help="first upload this corpus.jsonl (resumable)"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="uploads at once (--ingest)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    connection_options(parser)
    parser.set_defaults(handler=_eval)


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    err = console(stderr=True)
    try:
        test = beir.load_test_set(args.dataset, split=args.split, qrels=args.qrels)
    except (OSError, ValueError) as exc:
        err.print(Text(f"docingest: {exc}", style="red"))
        return 2
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in evaluate.MODES]
    if unknown or not modes:
        err.print(Text(f"docingest: --modes takes {', '.join(evaluate.MODES)}", style="red"))
        return 2
    if args.limit is not None:
        kept = list(test.queries)[: args.limit]
        test = beir.TestSet({q: test.queries[q] for q in kept}, {q: test.qrels[q] for q in kept})
    wanted = evaluate.variants(modes, rerank=args.rerank)
    client = client_for(args, settings)
    with client:
        try:
            ingested = _ingest(client, args, err) if args.ingest else None
            judged = evaluate.qrels_documents(test.qrels)
            missing = len(judged - beir.existing_documents(client, args.index))
            if missing:  # the figures are then lower than the index could give
                err.print(
                    Text(f"eval: {missing} of the {len(judged)} judged documents are not in "
                         f"index '{args.index}'", style="yellow")
                )  # fmt: skip
            problem = (
                evaluate.rerank_problem(client, args.index, next(iter(test.queries.values())))
                if args.rerank and test.queries
                else None
            )
            if problem is not None:
                err.print(Text(f"docingest: --rerank, but searches of '{args.index}' are not "
                               f"re-ranked ({problem})", style="red"))  # fmt: skip
                return 2
            results = evaluate.evaluate(client, args.index, test, wanted, baseline=args.baseline)
        except DocingestError as exc:
            err.print(Text(f"docingest: {exc}", style="red"))
            return 1
        except ValueError as exc:
            err.print(Text(f"docingest: {exc}", style="red"))
            return 2
    report: dict[str, Any] = {
        "index": args.index,
        "queries": len(test.queries),
        "judged_documents_missing": missing,
        "baseline": args.baseline or wanted[0].name,
        "variants": [result.as_json() for result in results],
    }
    if ingested is not None:
        report["ingest"] = ingested
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        show(console(), table(results))
        print(f"{len(test.queries)} queries; wins/losses on nDCG@10 against {report['baseline']}")
    failed = evaluate.unreranked(results, len(test.queries))
    if failed:  # the re-ranker stopped answering after the first query: the rows mean nothing
        err.print(Text(f"docingest: {', '.join(failed)} re-ranked no query", style="red"))
        return 1
    return 0


def _ingest(client: Client, args: argparse.Namespace, err: Any) -> dict[str, Any]:
    shown = [-1]

    def progress(report: beir.IngestReport, total: int) -> None:
        done = report.uploaded + report.skipped + len(report.failed)
        line = f"ingest: {done}/{total} documents ({len(report.failed)} failed)"
        if err.is_terminal:
            err.print(line, end="\r")
        elif done // 100 != shown[0] // 100 or done == total:  # a line per 100 in a log
            err.print(line)
        shown[0] = done

    report = beir.ingest_corpus(
        client, args.index, args.ingest, concurrency=args.concurrency, on_progress=progress
    )
    if err.is_terminal:
        err.print()
    for document_id, problem in list(report.failed.items())[:10]:
        err.print(Text(f"ingest: {document_id}: {problem}", style="yellow"))
    return {
        "uploaded": report.uploaded,
        "skipped": report.skipped,
        "failed": len(report.failed),
        "seconds": round(report.seconds, 1),
    }


def table(results: list[evaluate.VariantResult]) -> Table:
    out = Table(show_edge=False, pad_edge=False)
    for column in ("variant", "nDCG@10", "R@10", "R@100", "MRR@10", "p50 ms", "p95 ms", "+/-"):
        out.add_column(column, justify="left" if column == "variant" else "right")
    for result in results:
        out.add_row(
            result.variant.name,
            f"{result.ndcg10:.3f}",
            f"{result.recall10:.3f}",
            f"{result.recall100:.3f}",
            f"{result.mrr10:.3f}",
            f"{result.latency_ms['p50']:.0f}",
            f"{result.latency_ms['p95']:.0f}",
            f"+{result.win_count}/-{result.loss_count}",
        )
    return out
