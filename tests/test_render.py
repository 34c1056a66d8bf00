"""The renderer: untrusted model and tool text never becomes an executable element."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbchat.ui.render import (
    COPY_HANDLER,
    STYLE,
    checkpoint_sections,
    render_checkpoint,
    render_compacted,
    render_markdown,
    render_notice,
    render_tool_call,
    render_tool_result,
    split_stable_blocks,
)
from nbchat.ui.visible import math_spans

XSS_PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](  javascript:alert(1))",
    "[click](java\tscript:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[click](vbscript:msgbox(1))",
    "[click](//evil.example/x)",
    "![img](javascript:alert(1))",
    "![img](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    '<svg onload="alert(1)"><circle/></svg>',
    "<iframe src='https://evil.example'></iframe>",
    "```html\n<script>alert(1)</script>\n```",
    "`<img src=x onerror=alert(1)>`",
    "<details open ontoggle=alert(1)>",
    '<div style="background:url(javascript:alert(1))">x</div>',
    '[x](https://ok.example "title" onclick=alert(1))',
    "[ref]\n\n[ref]: javascript:alert(1)",
    "<style>body{display:none}</style>",
    "$<img src=x onerror=alert(1)>$",
    "\\(<script>alert(1)</script>\\)",
    "<<script>script>alert(1)<</script>/script>",
    "<body onload=alert(1)>",
    '<math><mtext><table><mglyph><style><img src=x onerror="alert(1)">',
]
FORBIDDEN_TAGS = {
    "script",
    "iframe",
    "object",
    "embed",
    "svg",
    "img",
    "style",
    "form",
    "body",
    "math",
    "link",
    "meta",
    "base",
    "input",
    "textarea",
    "video",
    "audio",
}
SAFE_URL_PREFIXES = ("http://", "https://", "mailto:", "#", "/")


class ExecutableFinder(HTMLParser):
    """Collects anything in parsed HTML that could run code or load a page."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in FORBIDDEN_TAGS:
            self.problems.append(f"<{tag}>")
        values = dict(attrs)
        for name, value in attrs:
            if name.startswith("on") and not (
                tag == "button"
                and values.get("class") == "nbchat-copy"
                and name == "onclick"
                and value == COPY_HANDLER
            ):
                self.problems.append(f"{tag}[{name}]")
            if name in ("href", "src", "action", "formaction", "style"):
                target = (value or "").strip().lower()
                if name == "style" or (target and not target.startswith(SAFE_URL_PREFIXES)):
                    self.problems.append(f"{tag}[{name}={value}]")


def executable_parts(markup: str) -> list[str]:
    finder = ExecutableFinder()
    finder.feed(markup)
    finder.close()
    return finder.problems


def every_rendering(text: str) -> list[str]:
    return [
        render_markdown(text),
        render_tool_call(text, text),
        render_tool_result(text, text, ok=False),
        render_compacted(text, rows_replaced=3, tokens_before=10, tokens_after=2),
        render_checkpoint(text),
        render_checkpoint("## " + text + "\n" + text),
        render_notice(text, error=True, traceback=text),
    ]


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_no_payload_survives_any_renderer(payload: str) -> None:
    for markup in every_rendering(payload):
        assert executable_parts(markup) == []


@given(st.text(max_size=200))
def test_no_text_at_all_produces_an_executable_element(text: str) -> None:
    for markup in every_rendering(text):
        assert executable_parts(markup) == []


def test_safe_links_render_and_open_in_a_new_tab() -> None:
    markup = render_markdown("[docs](https://example.org/a?b=1) and [mail](mailto:a@b.c)")
    assert '<a href="https://example.org/a?b=1" target="_blank"' in markup
    assert 'href="mailto:a@b.c"' in markup


def test_images_become_links_so_nothing_loads_by_itself() -> None:
    markup = render_markdown("![plot](https://example.org/p.png)")
    assert "<img" not in markup
    assert '<a href="https://example.org/p.png"' in markup and "[image: plot]" in markup


def test_code_blocks_are_highlighted_with_a_copy_button() -> None:
    markup = render_markdown("```python\ndef f():\n    return 1\n```")
    assert '<button class="nbchat-copy"' in markup
    assert '<span class="k">def</span>' in markup


def test_tables_render() -> None:
    markup = render_markdown("|a|b|\n|-|-|\n|1|2|")
    assert "<table>" in markup and "<td>1</td>" in markup


def test_math_is_kept_for_mathjax() -> None:
    markup = render_markdown(r"Euler: $e^{i\pi} + 1 = 0$ and \(a_1 * b_2\) and $$x_1$$")
    assert r"$e^{i\pi} + 1 = 0$" in markup
    assert r"\(a_1 * b_2\)" in markup
    assert "$$x_1$$" in markup
    assert "<em>" not in markup


def test_dollar_amounts_are_not_math() -> None:
    assert "<em>" in render_markdown("costs $5 and *really* $10")


# The math rules as the regular expression the renderer used before: the scanner must agree.
OLD_MATH_PATTERN = re.compile(
    r"(\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<![\\$\w])\$(?=\S)[^$\n]+?(?<=\S)\$(?![\w$]))",
    re.DOTALL,
)


@given(st.text(alphabet="$\\()[]xé_ \n", max_size=60))
def test_math_spans_are_where_the_old_expression_found_them(text: str) -> None:
    expected = [match.span() for match in OLD_MATH_PATTERN.finditer(text)]
    assert list(math_spans(text)) == expected


class CountingText(str):
    """A str that adds up how many characters its `find` calls look at."""

    examined = 0

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        start = 0 if start is None else start
        end = len(self) if end is None else end
        found = super().find(sub, start, end)
        CountingText.examined += (end if found < 0 else found + len(sub)) - start
        return found


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("\\( x " * 20_000, 0),
        ("$$ x " * 20_000, 10_000),
        ("\\[ x " * 20_000, 0),
        ("$a " * 20_000 + "\n", 0),
        ("$a\n" * 20_000, 0),
        ("$$a$$ \\(b " * 10_000, 10_000),
        ("$a$ " * 20_000, 20_000),
    ],
    ids=["unclosed \\(", "paired $$", "unclosed \\[", "inline $", "$ lines", "mixed", "closed $"],
)
def test_finding_math_looks_at_each_character_a_bounded_number_of_times(
    text: str, count: int
) -> None:
    CountingText.examined = 0
    assert len(list(math_spans(CountingText(text)))) == count
    assert CountingText.examined <= 4 * len(text)


def test_an_unclosed_opener_repeated_renders_as_text() -> None:
    text = "\\( x " * 20_000
    markup = render_markdown(text)
    assert markup.count("( x") == 20_000 and "\ue000" not in markup


def test_every_one_of_many_math_spans_comes_back_verbatim_and_escaped() -> None:
    text = " ".join(f"$$a<{index}>b$$" for index in range(25_000))
    markup = render_markdown(text)
    shown = re.findall(r"\$\$(.*?)\$\$", markup)
    assert shown == [f"a&lt;{index}&gt;b" for index in range(25_000)]
    assert "\ue000" not in markup and "\ue001" not in markup


def test_markers_in_the_text_cannot_pull_in_another_span() -> None:
    markup = render_markdown("\ue0000\ue001 and $$x<y$$")
    assert markup.count("$$x&lt;y$$") == 1 and "\ue000" not in markup


def test_long_tool_results_are_capped_for_display() -> None:
    markup = render_tool_result("run_shell", "a" * 5000 + "b" * 5000, limit=1000)
    assert "a" * 500 in markup and "b" * 500 in markup
    assert "[... 9,000 characters not shown ...]" in markup
    assert "(10,000 chars)" in markup


def test_failed_tool_results_are_marked() -> None:
    assert "nbchat-failed" in render_tool_result("run_shell", "boom", ok=False)
    assert "nbchat-failed" not in render_tool_result("run_shell", "fine")


def test_the_compacted_card_says_what_it_replaced() -> None:
    markup = render_compacted(
        "## Goal\nfix", rows_replaced=12, tokens_before=9000, tokens_after=800
    )
    assert "12 rows, ~9,000 → ~800 tokens" in markup


CHECKPOINT = (
    "## Goal\nKeep the last token\n\n## Progress\n### Done\n"
    + "".join(f"- [x] step {n}\n" for n in range(8))
    + "\n# Recorded facts\n(Kept by code.)\n\n## Files read\n- src/parse.py"
)


def test_a_checkpoint_is_one_section_per_heading_long_ones_folded() -> None:
    sections = checkpoint_sections(CHECKPOINT)
    assert [title for title, _ in sections] == ["Goal", "Progress", "Recorded facts", "Files read"]
    markup = render_checkpoint(CHECKPOINT)
    assert markup.startswith('<div class="nbchat-checkpoint">')
    assert "<details open><summary>Goal</summary>" in markup
    assert "<details><summary>Progress</summary>" in markup  # ten lines: folded
    assert "<h3>Done</h3>" in markup  # a sub-heading stays inside its section
    assert "<h2>" not in markup and "<h1>" not in markup


def test_a_heading_inside_a_code_fence_starts_no_section() -> None:
    text = "## Last changes\n```\n## not a heading\n```\n## Next\nrun it"
    assert [title for title, _ in checkpoint_sections(text)] == ["Last changes", "Next"]


def test_a_checkpoints_headings_read_at_the_chats_type_scale() -> None:
    rule = STYLE[STYLE.index(".nbchat-checkpoint h1") :].split("}")[0]
    assert "font-size: 1em" in rule


def test_the_compaction_card_shows_the_checkpoint_in_sections() -> None:
    markup = render_compacted(CHECKPOINT, rows_replaced=3)
    assert '<div class="nbchat-checkpoint">' in markup
    assert "<summary>Files read</summary>" in markup


@pytest.mark.parametrize(
    ("text", "finished", "tail"),
    [
        ("one\n\ntwo", "one\n\n", "two"),
        ("no boundary yet", "", "no boundary yet"),
        ("a\n\n```\ncode\n\nmore", "a\n\n", "```\ncode\n\nmore"),
        ("a\n\n```\ncode\n```\n\nb", "a\n\n```\ncode\n```\n\n", "b"),
        ("a\n\n~~~\nx\n```\n\ny", "a\n\n", "~~~\nx\n```\n\ny"),
    ],
)
def test_stable_blocks_never_split_an_open_code_fence(text: str, finished: str, tail: str) -> None:
    assert split_stable_blocks(text) == (finished, tail)


@given(st.text(alphabet="ab`~ \n", max_size=80))
def test_stable_blocks_are_a_prefix_and_the_tail(text: str) -> None:
    finished, tail = split_stable_blocks(text)
    assert finished + tail == text
