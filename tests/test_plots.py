"""nbchat.notebook.plots: the usage chart's figures, its compaction marks and a well-formed, stable
SVG."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from nbchat.notebook import demo, plots
from nbchat.store.store import Store

SVG = "{http://www.w3.org/2000/svg}"


def request(created: str, prompt: int | None) -> dict[str, Any]:
    return {"created": created, "prompt_tokens": prompt, "completion_tokens": 5}


def compaction(
    created: str, kind: str = "summary", before: int = 900, after: int = 300
) -> dict[str, Any]:
    return {
        "created": created,
        "kind": kind,
        "tokens_before": before,
        "tokens_after": after,
        "rows_replaced": 7,
    }


REQUESTS = [request("t1", 400), request("t2", 700), request("t4", 350), request("t5", 500)]


def bars(svg: str) -> list[ET.Element]:
    return ET.fromstring(svg).findall(f"{SVG}rect")[1:]  # the first is the background


def texts(svg: str) -> list[str]:
    return [element.text or "" for element in ET.fromstring(svg).iter(f"{SVG}text")]


def test_the_text_form_lists_requests_peak_trigger_and_each_compaction() -> None:
    chart = plots.usage_chart(REQUESTS, [compaction("t3")], trigger=600)
    assert repr(chart) == (
        "Prompt tokens per request: 4 requests, peak 700, trigger 600\n"
        "  summary after request 2: 7 rows, 900 → 300 tokens"
    )


def test_a_compaction_is_placed_after_the_last_request_made_before_it() -> None:
    records = [compaction("t0", "prune"), compaction("t3"), compaction("t9", "chunked")]
    chart = plots.usage_chart(REQUESTS, records)
    assert [(mark.after, mark.kind) for mark in chart.marks] == [
        (0, "prune"),
        (2, "summary"),
        (4, "chunked"),
    ]


@pytest.mark.parametrize("kind", ["retry", "edit"])
def test_retries_and_edits_recorded_beside_compactions_are_not_marked(kind: str) -> None:
    chart = plots.usage_chart(REQUESTS, [compaction("t3", kind)])
    assert chart.marks == ()
    assert "after request" not in repr(chart)


def test_a_request_without_reported_usage_is_a_gap_not_a_zero_bar() -> None:
    chart = plots.usage_chart([request("t1", 400), request("t2", None), request("t3", 500)])
    assert chart.prompt_tokens == (400, None, 500)
    titles = [bar.find(f"{SVG}title").text for bar in bars(chart.to_svg())]  # type: ignore[union-attr]
    assert titles == ["request 1: 400 prompt tokens", "request 3: 500 prompt tokens"]


def test_taller_bars_stand_for_more_tokens() -> None:
    heights = [float(bar.get("height", "")) for bar in bars(plots.usage_chart(REQUESTS).to_svg())]
    assert heights[1] == max(heights)
    assert heights[2] == min(heights)
    assert heights[0] / heights[2] == pytest.approx(400 / 350, rel=0.01)


def test_the_svg_shows_the_title_trigger_and_compaction_labels() -> None:
    svg = plots.usage_chart(REQUESTS, [compaction("t3")], trigger=600, title="Demo").to_svg()
    shown = texts(svg)
    assert shown[0] == "Demo"
    assert "trigger 600" in shown
    assert "summary: 900 → 300" in shown
    assert "request" in shown


def test_text_in_the_svg_is_escaped() -> None:
    svg = plots.usage_chart(REQUESTS, title="<b>tokens & more</b>").to_svg()
    assert "<b>" not in svg
    assert texts(svg)[0] == "<b>tokens & more</b>"


def test_the_same_records_give_the_same_svg_bytes() -> None:
    records = [compaction("t3")]
    first = plots.usage_chart(REQUESTS, records, trigger=600)
    second = plots.usage_chart(list(REQUESTS), list(records), trigger=600)
    assert first.to_svg() == second.to_svg()
    assert first._repr_svg_() == first.to_svg()


def test_a_session_with_no_requests_gives_an_empty_chart() -> None:
    chart = plots.usage_chart([])
    assert repr(chart) == "Prompt tokens per request: 0 requests, no usage reported"
    assert bars(chart.to_svg()) == []


@pytest.mark.parametrize(
    ("peak", "top"),
    [(700, 800), (2857, 4000), (9000, 10000), (45_000, 80_000), (1, 4), (0, 4)],
)
def test_the_axis_ends_at_a_round_number_above_the_peak(peak: int, top: int) -> None:
    svg = plots.usage_chart([request("t1", peak)]).to_svg()
    assert f"{top:,}" in texts(svg)


def test_the_demo_sessions_chart_marks_its_compaction_after_the_ninth_request(
    store: Store,
) -> None:
    session_id = demo.add_demo_session(store)
    chart = plots.usage_chart(
        store.list_requests(session_id), store.list_compactions(session_id), trigger=1500
    )
    assert len(chart.prompt_tokens) == 19
    (mark,) = chart.marks
    assert (mark.after, mark.kind, mark.rows_replaced) == (9, "summary", 11)
    assert len(bars(chart.to_svg())) == 19
