"""`carryall tui`: browse sessions in the terminal.

Three parts: the sessions list (newest first), the transcript of the session
under the cursor, and a recall search box whose hits open their session at
the message that matched. Every image shows as its `image_placeholder`.
Content is never markup and never a control sequence: it is shown as
`rich.text.Text` after `carryall._text.printable`, and notifications that
echo it go through `_notify`, which turns markup off.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.notifications import SeverityLevel
from textual.widgets import DataTable, Footer, Header, Input, OptionList, Static
from textual.widgets.option_list import Option

from carryall._commands._output import listed_title, snippet_text
from carryall._text import age, printable, shorten
from carryall.errors import CarryallError
from carryall.sessions import AnyStore, Hit, SessionInfo, render_message_text, render_text
from carryall.sessions.render import usage_lines

__all__ = ["MessageView", "SessionsApp"]

WINDOW = 400
"""At most this many messages are shown at once: the window around the one asked for."""
TITLE_WIDTH = 36
"""A title in the list is cut to this many characters, so a row fits 80 columns whole."""
NARROW = 140
"""Below this many columns the list sits above the transcript instead of beside it."""


class MessageView(Static):
    """One message of the transcript pane; `plain` is its text (what a test or a copy reads)."""

    def __init__(self, plain: str, *, index: int | None = None, classes: str = "") -> None:
        super().__init__(Text(printable(plain)), classes=classes)
        self.plain = plain
        self.index = index


class SessionsApp(App[None]):
    """The sessions browser: list, transcript and recall search."""

    TITLE = "carryall sessions"
    CSS = """
    #main.-narrow { layout: vertical; }
    #left { width: 45%; min-width: 30; }
    #main.-narrow #left { width: 100%; height: 11; }
    #sessions { height: 1fr; }
    #hits { height: 1fr; display: none; }
    #hits.shown { display: block; }
    #transcript { width: 1fr; padding: 0 1; }
    MessageView { margin-bottom: 1; }
    MessageView.assistant { color: $text; }
    MessageView.note { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search"),
        Binding("escape", "show_sessions", "Sessions"),
        Binding("ctrl+r", "reload", "Reload"),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def __init__(self, store: AnyStore) -> None:
        super().__init__()
        self.store = store
        self.infos: list[SessionInfo] = []
        self.hits: list[Hit] = []
        self.shown: str | None = None
        """The id of the session in the transcript pane."""

    def compose(self) -> ComposeResult:
        """The search box and list on the left, the transcript on the right."""
        yield Header()
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Input(placeholder="recall: search every session, then enter", id="search")
                yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
                yield OptionList(id="hits")
            yield VerticalScroll(id="transcript")
        yield Footer()

    async def on_mount(self) -> None:
        """Fill the list and open the newest session."""
        table = self.query_one("#sessions", DataTable)
        table.add_columns("id", "age", "turns", "title")
        self._fit(self.size.width)
        await self.action_reload()
        table.focus()

    def on_resize(self, event: Resize) -> None:
        """Stack the list above the transcript when the two do not fit side by side."""
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        # The list needs an id, age, turns and 30 characters of title (about 70
        # columns with the cells' padding); below twice that, side by side
        # would cut the titles to nothing.
        self.query_one("#main", Horizontal).set_class(width < NARROW, "-narrow")

    # -- actions --------------------------------------------------------------

    async def action_reload(self) -> None:
        """Read the sessions list again (another run may have recorded since)."""
        problems: list[CarryallError] = []
        self.infos = self.store.list(on_error=problems.append)
        table = self.query_one("#sessions", DataTable)
        table.clear()
        now = datetime.now(UTC)
        for info in self.infos:
            title = listed_title(info)
            table.add_row(
                info.meta.id,
                age(info.updated, now),
                Text(str(info.turns), justify="right"),
                Text(shorten(printable(title, keep=""), TITLE_WIDTH, ellipsis="…")),
                key=info.meta.id,
            )
        for problem in problems:
            self._notify(str(problem), "warning")
        if not self.infos:
            await self._show_note("No sessions yet. Runs are recorded here as they happen.")
        elif self.shown is None:
            await self.open_session(self.infos[0].meta.id)

    def action_search(self) -> None:
        """Move to the recall search box."""
        self.query_one("#search", Input).focus()

    def action_show_sessions(self) -> None:
        """Leave the search hits and go back to the sessions list."""
        self.query_one("#hits", OptionList).remove_class("shown")
        self.query_one("#sessions", DataTable).focus()

    # -- events ---------------------------------------------------------------

    async def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Open the session under the cursor."""
        session_id = event.row_key.value
        if session_id is not None and session_id != self.shown:
            await self.open_session(session_id)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Search every session and list the hits."""
        hits_list = self.query_one("#hits", OptionList)
        hits_list.clear_options()
        try:
            self.hits = self.store.recall.search(event.value, limit=100)
        except CarryallError as exc:
            self._notify(str(exc), "error")
            return
        if not self.hits:
            self._notify(f"no matches for {event.value!r}", "information")
            return
        for number, hit in enumerate(self.hits):
            label = Text(f"{hit.session} #{hit.message} {hit.role}\n", style="bold")
            label.append_text(snippet_text(hit.snippet, hit.matches, "reverse"))
            hits_list.add_option(Option(label, id=str(number)))
        hits_list.add_class("shown")
        hits_list.highlighted = 0
        hits_list.focus()

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Open the session a hit is in, at the message that matched."""
        if event.option.id is None:
            return
        hit = self.hits[int(event.option.id)]
        await self.open_session(hit.session, hit.message)

    # -- the transcript pane --------------------------------------------------

    async def open_session(self, session_id: str, message: int | None = None) -> None:
        """Show a session's transcript, scrolled to `message` when given."""
        try:
            session = self.store.open(session_id)
        except CarryallError as exc:
            self._notify(str(exc), "error")
            return
        for note in session.damage:
            self._notify(note, "warning")
        self.shown = session.id
        self.sub_title = printable(session.meta.title or session.id, keep="")
        messages = session.messages()
        times = session.times()
        if message is None:
            first = max(0, len(messages) - WINDOW)
        else:
            first = max(0, min(message - WINDOW // 2, len(messages) - WINDOW))
        last = min(len(messages), first + WINDOW)
        head = render_text(session.meta, []).rstrip("\n")
        usage = session.usage()
        if usage:
            # The total alone: a long session's request lines are for `sessions show`.
            head += "\n" + printable(usage_lines(usage)[1], keep="")
        views = [MessageView(head, classes="note")]
        if first > 0:
            views.append(
                MessageView(
                    f"… {first} earlier messages (carryall sessions show {session.id})",
                    classes="note",
                )
            )
        for index in range(first, last):
            item = messages[index]
            plain = render_message_text(index, item, times[index])
            views.append(MessageView(plain, index=index, classes=item.role))
        if last < len(messages):
            views.append(MessageView(f"… {len(messages) - last} later messages", classes="note"))
        pane = self.query_one("#transcript", VerticalScroll)
        await pane.remove_children()
        await pane.mount_all(views)
        if message is not None:
            target = next((v for v in views if v.index == message), None)
            if target is not None:
                self.call_after_refresh(pane.scroll_to_widget, target, animate=False, top=True)
        else:
            pane.scroll_home(animate=False)

    def _notify(self, text: str, severity: SeverityLevel) -> None:
        """A notification whose text is content: shown as written, never as markup."""
        self.notify(printable(text), severity=severity, markup=False)

    async def _show_note(self, text: str) -> None:
        pane = self.query_one("#transcript", VerticalScroll)
        await pane.remove_children()
        await pane.mount(MessageView(text, classes="note"))
